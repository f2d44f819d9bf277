"""`kbench run -m` against the local test server on the CPU: what a user sees and what the store keeps.

The slow test evaluates real cpp candidates (one broken build, one prose answer, the rest correct) over
two problems x two samples x two turns. The others answer in prose (`no_code` verdicts, nothing to
build), so they exercise sampling, the cache, failures, resume and configuration errors in seconds.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from evalfixtures import use_builds
from llmserver import load_server_module
from modelanswers import BAD_LINE, answer, source_for, task, turn
from typer.testing import CliRunner, Result

from kbench.cli import app
from kbench.errors import KbenchError
from kbench.report import load_series, sections
from kbench.store import Store

LLMServer = load_server_module().LLMServer
HOST_PATH = re.compile(r"(?<![\w.])(?:/|~/)[\w.+-]+/")
PROSE = "I would fuse the three operators into one loop."


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_builds: Path) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    # the session's builds (conftest.shared_builds): each answer's extension is built once per session
    monkeypatch.setenv("KBENCH_CACHE_DIR", str(use_builds(tmp_path / "cache", shared_builds)))
    monkeypatch.setenv("KBENCH_BASELINES", "eager")  # torch.compile on a CPU adds 10-20 s per problem
    monkeypatch.setenv("KBENCH_DEVICE", "cpu")  # the same on a machine with a GPU


def _run(url: str, store: Path, *extra: str) -> Result:
    args = ["run", "-m", "openai/test", "--base-url", url, "--store", str(store), "--retries", "0", *extra]
    return CliRunner().invoke(app, args)


def _run_id(result: Result) -> str:
    return re.findall(r"^run (\S+):", result.output, re.M)[-1]


def _error(result: Result) -> str:
    """The message of kbench's own error (the console script prints it and exits with 2)."""
    assert isinstance(result.exception, KbenchError) and result.exception.exit_code == 2, result.output
    return str(result.exception)


def _section(store: Path, run_id: str, title: str) -> dict[str, str]:
    with Store(store) as db:
        found = dict(sections(load_series(db, [run_id])))
    return {label: cells[0] for label, cells in next(v for k, v in found.items() if k.startswith(title))}


class Responder:
    """2/1: the first turn-0 answer does not compile, the second is prose; every other answer is good."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: Counter[str] = Counter()

    def __call__(self, request: Any) -> str:
        relu = "torch.relu" in task(request)[task(request).rfind("class Model(") :]
        if turn(request) > 0 or not relu:
            return answer(request)
        with self.lock:
            self.seen["2/1"] += 1
            first = self.seen["2/1"] == 1
        return answer(request, broken=True) if first else PROSE


@pytest.mark.slow
@pytest.mark.xdist_group("model-runs")  # the model runs' answers build once, on one worker
def test_model_run_end_to_end(tmp_path: Path) -> None:
    store = tmp_path / "runs" / "kbench.db"
    with LLMServer(respond=Responder()) as server:
        result = _run(server.openai_url, store, "--problems", "2/1,2/2", "--samples", "2", "--turns", "2")
        seen = list(server.stats.seen)
    out = result.output
    assert result.exit_code == 0, out
    run_id = _run_id(result)
    # without a GPU: cpp and small, said first; then the run id and the settings, before any verdict
    assert "no GPU found: evaluating with the cpp backend and the `small` preset" in out
    assert out.index(f"run {run_id}\n") < out.index("kbench:2/")
    assert "2 problems x 2 samples x 2 turns = 8 verdicts" in out
    assert "temperature 0.7 (kbench's default with --samples > 1" in out
    assert "evaluating: cpp on the CPU, preset small, fp32" in out
    assert re.search(r"kbench:2/1 +cpp +s[01]t0 +no_code +no code block", out)  # a live no_code line
    assert re.search(
        r"kbench:2/1 +cpp +s[01]t0 +build_error +main\.cpp:12:22: error: ‘bb’ was not declared", out
    )
    assert "8/8" in out and "ETA" in out and "cache hits 0" in out
    # the prompt shows the small preset's sizes, and every request carried the sampling temperature
    first = next(r for r in seen if turn(r) == 0 and "torch.relu" in task(r)[task(r).rfind("class Model(") :])
    assert "batch_size = 16\nin_features = 64\nout_features = 48\n" in task(first)
    assert "batch_size = 2048" not in task(first) and {r.body["temperature"] for r in seen} == {0.7}
    # the broken build's feedback: its own errors, where they are, nothing of the host or of kbench
    [retry] = [r for r in seen if turn(r) == 1 and BAD_LINE in r.messages[1]["content"]]
    fb = retry.messages[2]["content"]
    line = source_for(first, broken=True).splitlines().index("    " + BAD_LINE) + 1
    assert f"main.cpp:12:34 (line {line} of your code): error: ‘undefined_thing’ was not declared" in fb
    assert HOST_PATH.search(fb) is None and "Traceback" not in fb and "kbench" not in fb
    assert fb.count("‘undefined_thing’ was not declared") == 1 and len(fb.encode()) < 3000
    # the summary: where the numbers come from, per problem as upstream counts, best of k, per turn
    assert "openai/test: numbers from CPU, small, fp32" in out and "per turn: openai/test" in out
    first_attempt = _section(store, run_id, "first attempt per problem")
    assert first_attempt["problems"] == "2" and first_attempt["correct"] == "1/2 (50%)"
    best = _section(store, run_id, "best of k")
    assert best["correct"] == "2/2 (100%)" and best["k = samples × turns"] == "2 × 2"
    requests = _section(store, run_id, "LLM requests")
    assert requests["sent to the server"] == "8" and requests["answered from the cache"] == "0"
    assert re.search(r"tokens in / out \(sent\) +│ +[\d,]+ / [\d,]+", out) and "latency median" in out
    with Store(store) as db:
        config = db.run(run_id).config
        assert db.run_problems(run_id) == ["kbench:2/1", "kbench:2/2"] and len(db.requests(run_id)) == 8
    assert (config["backend"], config["preset"], config["temperature"]) == ("cpp", "small", 0.7)
    page = Path(re.findall(r"^run \S+: .*; report (.+)$", out, re.M)[-1].strip()).read_text()
    assert "CPU, small, fp32" in page and "first attempt per problem" in page and "per turn" in page.lower()


def test_cache_hits_are_counted_and_no_cache_asks_again(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    with LLMServer(respond=lambda r: PROSE) as server:
        args = ("--problems", "2/1", "--samples", "3")
        first = _run(server.openai_url, store, *args)
        again = _run(server.openai_url, store, *args)
        assert server.stats.requests == 3  # the second run was answered from the cache
        off = _run(server.openai_url, store, *args, "--no-cache")
        assert server.stats.requests == 6
    assert first.exit_code == again.exit_code == off.exit_code == 0, first.output
    assert "cache hits 3" in again.output and "response cache: off" in off.output
    assert _section(store, _run_id(again), "LLM requests")["answered from the cache"] == "3"
    assert _section(store, _run_id(off), "LLM requests")["answered from the cache"] == "0"
    assert _section(store, _run_id(first), "LLM requests")["sent to the server"] == "3"


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("500", "HTTP 500 server error"),
        ("429", "HTTP 429 rate limited"),
        ("malformed", "bad JSON in the response"),
    ],
)
def test_request_failures_show_their_reason_live_and_in_the_summary(
    tmp_path: Path, fault: str, reason: str
) -> None:
    store = tmp_path / "k.db"
    with LLMServer(respond=lambda r: PROSE, script=[fault] * 2) as server:
        result = _run(server.openai_url, store, "--problems", "2/1", "--samples", "2", "--turns", "2")
    assert result.exit_code == 1, result.output
    assert re.search(rf"request failed kbench:2/1 s[01]t0: {re.escape(reason)}", result.output)
    run_id = _run_id(result)
    assert _section(store, run_id, "LLM requests")["failed"] == f"2 ({reason} ×2)"
    assert "2 LLM requests failed" in result.output and f"--resume {run_id}" in result.output


def test_refused_connection_is_named(tmp_path: Path) -> None:
    with LLMServer() as server:
        url = server.openai_url
    result = _run(url, tmp_path / "k.db", "--problems", "2/1")
    assert (
        result.exit_code == 1
        and f"request failed kbench:2/1 s0t0: connection refused by {url}" in result.output
    )


def test_resume_restores_the_stored_configuration(tmp_path: Path) -> None:
    store = tmp_path / "k.db"
    with LLMServer(respond=lambda r: PROSE, script=["500", "500"]) as server:
        first = _run(
            server.openai_url, store, "--problems", "2/1,2/3", "--samples", "2", "--temperature", "0.3"
        )
        run_id = _run_id(first)
        assert first.exit_code == 1 and server.stats.requests == 4
        # only the flags that say where things are: the run's own settings come back from the store
        resumed = CliRunner().invoke(app, ["run", "--resume", run_id, "--store", str(store)])
        assert server.stats.requests == 6  # the two failed samples, nothing else
        bodies = [r.body for r in server.stats.seen]
    assert resumed.exit_code == 0, resumed.output
    assert resumed.output.startswith(f"run {run_id} (resumed: 2 of 4 verdicts stored)")
    assert "2 new verdicts, 0 kept from before" in resumed.output  # the batch's stored two are not new
    assert {b["temperature"] for b in bodies} == {0.3}
    with Store(store) as db:
        assert len(db.verdicts(run_id)) == 4 and len(db.runs()) == 1
    conflict = CliRunner().invoke(
        app, ["run", "--resume", run_id, "--store", str(store), "--samples", "3", "--backend", "triton"]
    )
    message = _error(conflict)
    assert "backend 'triton' (stored 'cpp')" in message and "samples 3 (stored 2)" in message


@pytest.mark.parametrize(
    ("model", "unset", "expected"),
    [("nosuch/model", False, "unknown LLM provider 'nosuch'"), ("openai/test", True, "OPENAI_API_KEY")],
)
def test_configuration_errors_leave_no_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str, unset: bool, expected: str
) -> None:
    if unset:
        monkeypatch.delenv("OPENAI_API_KEY")
    store = tmp_path / "k.db"
    Store(store).close()
    result = CliRunner().invoke(app, ["run", "-m", model, "--problems", "2/1", "--store", str(store)])
    assert expected in _error(result)
    with Store(store) as db:
        assert db.runs() == []


def test_no_gpu_for_an_explicit_cuda_backend(tmp_path: Path) -> None:
    """Exit code 2 and one line, from the console script as a user runs it."""
    args = [
        "run",
        "-m",
        "openai/test",
        "--problems",
        "2/1",
        "--backend",
        "cuda",
        "--store",
        str(tmp_path / "k.db"),
    ]
    proc = subprocess.run(
        [sys.executable, "-c", "from kbench.cli import main; main()", *args], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "no GPU for backend cuda" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "k.db").exists()
