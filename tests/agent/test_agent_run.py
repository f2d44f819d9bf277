"""`kbench run --agent` end to end on the CPU: a local OpenAI-compatible server replays a tool-calling
model (a malformed call, an unknown tool, evaluate, submit), kbench's own MCP tools answer it, and the
submit is judged by the trusted evaluator into the run. The process is killed mid-session and resumed;
nothing is asked twice and the transcript is whole. A session that spends its tool-call budget gets its
last answer and ends unsolved. A candidate tuned to the public seeds fails its final verdict. The loop's
logic on its own: test_agent_session.py."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp.server.mcpserver")

from evalfixtures import cpu_config, cpu_config_file, fixture_source, use_builds  # noqa: E402
from llmserver import load_server_module  # noqa: E402

from kbench.config import FIXED_SEED_BASE  # noqa: E402
from kbench.store import Store  # noqa: E402

pytestmark = pytest.mark.xdist_group("agent-run")

KBENCH = str(Path(sys.executable).with_name("kbench"))
server_module = load_server_module()
LLMServer, Reply = server_module.LLMServer, server_module.Reply
HONEST = fixture_source("cpp_honest.py")


def script(release: threading.Event | None = None) -> Any:
    """The model, by how many tool results its conversation holds; with `release`, the answer after
    evaluate's result waits for it (the test kills kbench meanwhile)."""

    def respond(req: Any) -> Any:
        n = len(req.tool_results)
        if n == 0:
            return Reply("Reading the problem.", [("show_problem", json.dumps({"problem": "2/1"}))])
        if n == 1:
            return Reply("", [("evaluate", '{"problem": "2/1", "source": '), ("compile", "{}")])
        if n == 3:
            return Reply("", [("evaluate", json.dumps({"problem": "2/1", "source": HONEST}))])
        if n == 4:
            if release is not None:
                release.wait(120)
            return Reply("Submitting.", [("submit", json.dumps({"problem": "2/1", "source": HONEST}))])
        return "done"

    return respond


def command(folder: Path, url: str, *more: str) -> list[str]:
    return [KBENCH, "run", "--base-url", url, "--store", str(folder / "k.db"), *more]


def env(cache: Path) -> dict[str, str]:
    return dict(os.environ) | {"OPENAI_API_KEY": "test", "KBENCH_CACHE_DIR": str(cache), "COLUMNS": "200"}


def steps_of(store: Path) -> list[Any]:
    if not store.exists():
        return []
    with Store(store) as s:
        return [t for r in s.runs() for t in s.transcript(r.run_id)]


@pytest.mark.slow
def test_an_agent_run_killed_mid_session_resumes_and_is_judged(tmp_path: Path, shared_builds: Path) -> None:
    cache = use_builds(tmp_path / "cache", shared_builds)
    release = threading.Event()
    start = [
        "--agent",
        "-m",
        "openai/agent-test",
        "--problems",
        "2/1",
        "--config",
        str(cpu_config_file(tmp_path, static_checks=True)),
    ]
    with LLMServer(respond=script(release)) as first:
        proc = subprocess.Popen(
            command(tmp_path, first.openai_url, *start), env=env(cache), stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and proc.poll() is None:
            if len([t for t in steps_of(tmp_path / "k.db") if t.role == "tool"]) >= 4:
                break  # evaluate answered; the model's next answer is being waited for
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        release.set()
        asked_first = first.stats.requests
    killed = steps_of(tmp_path / "k.db")
    assert [t.role for t in killed][-1] == "tool" and all(t.role != "end" for t in killed)
    with Store(tmp_path / "k.db") as s:
        (run_id,) = [r.run_id for r in s.runs()]
    with LLMServer(respond=script()) as second:
        done = subprocess.run(
            command(tmp_path, second.openai_url, "--resume", run_id), env=env(cache), capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert second.stats.requests == 1  # only the answer the kill interrupted
        assert "agent sessions 1, submitted 1, solved 1" in done.stdout
        (conversation,) = second.stats.seen
    assert asked_first == 4 and len(conversation.tool_results) == 4

    with Store(tmp_path / "k.db") as s:
        ((key, verdict),) = s.verdicts(run_id)
        steps = s.transcript(run_id)
        requests = s.requests(run_id)
    assert (key.problem_key, key.sample, key.model, verdict.status.value) == (
        "kbench:2/1",
        0,
        "openai/agent-test",
        "ok",
    )
    assert [t.step for t in steps] == list(range(len(steps)))
    assert [t.role for t in steps] == ["user", "assistant", "tool", "assistant", "tool", "tool", "assistant",
                                       "tool", "assistant", "tool", "end"]  # fmt: skip
    tools = [t.message for t in steps if t.role == "tool"]
    assert [t["tool"] for t in tools] == ["show_problem", "evaluate", "compile", "evaluate", "submit"]
    assert [t["is_error"] for t in tools] == [False, True, True, False, False]
    assert json.loads(tools[3]["text"])["status"] == "ok" and json.loads(tools[4]["text"])["status"] == "ok"
    assert steps[-1].message["reason"] == "submitted"
    assert len(requests) == 4  # three answers before the kill, one after: the killed request has none
    assert verdict.correctness is not None
    secret = [seed for seed in verdict.correctness.seeds if seed >= FIXED_SEED_BASE + 3]
    paths = [str(cache), str(tmp_path), tempfile.gettempdir() + "/", str(Path.home())]
    for t in tools:
        assert not any(str(seed) in t["text"] for seed in secret)
        assert not re.search(r"expected -?\d", t["text"]) and not any(p in t["text"] for p in paths), t
    assert "transcript" in (tmp_path / f"{run_id}.html").read_text()


LAST_WORDS = "Out of budget before a candidate was ready."


def spends_its_calls(req: Any) -> Any:
    """The model reads the problem until told its budget is spent, then tries one more evaluate."""
    if "budget is spent" in req.last_user:
        return Reply(LAST_WORDS, [("evaluate", json.dumps({"problem": "2/1", "source": HONEST}))])
    return Reply("Reading the problem.", [("show_problem", json.dumps({"problem": "2/1"}))])


def test_a_session_that_spends_its_tool_calls_gets_a_last_answer_and_ends_unsolved(tmp_path: Path) -> None:
    config = str(cpu_config_file(tmp_path, static_checks=True))
    with LLMServer(respond=spends_its_calls) as server:
        done = subprocess.run(
            command(tmp_path, server.openai_url, "--agent", "-m", "openai/agent-test", "--problems", "2/1",
                    "--config", config, "--agent-calls", "2"),
            env=env(tmp_path / "cache"), capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        asked = [req.last_user for req in server.stats.seen]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "agent sessions 1, submitted 0, solved 0" in done.stdout
    assert len(asked) == 3 and "budget is spent (2 of 2 tool calls)" in asked[-1]  # the last answer, once

    with Store(tmp_path / "k.db") as s:
        (run,) = s.runs()
        ((key, verdict),) = s.verdicts(run.run_id)
        steps = s.transcript(run.run_id)
    reason = "budget spent (2 of 2 tool calls) without a submission"
    assert [t.role for t in steps] == ["user", "assistant", "tool", "assistant", "tool", "user", "assistant",
                                       "tool", "end"]  # fmt: skip
    grace, last, refused, end = (t.message for t in steps[5:])
    assert (grace["kind"], grace["why"]) == ("grace", "2 of 2 tool calls")
    assert last["text"] == LAST_WORDS and [c["name"] for c in last["calls"]] == ["evaluate"]
    assert refused["tool"] == "evaluate" and refused["is_error"] and "only submit" in refused["text"]
    assert refused["counts"]["calls"] == 2 and refused["counts"]["evals"] == 0  # refused before the desk
    assert end == {"reason": reason, "submitted": False, "answer": None}
    assert (key.problem_key, key.model) == ("kbench:2/1", "openai/agent-test")
    assert verdict.status.value == "no_code" and verdict.message == f"the agent submitted nothing: {reason}"
    assert reason in (tmp_path / f"{run.run_id}.html").read_text()


def test_agent_mode_refuses_a_model_without_tools_and_turns(tmp_path: Path) -> None:
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "level_2_problem_1_sample_0.py").write_text("x = 1\n")
    replay = subprocess.run(
        [KBENCH, "run", "--agent", "-m", f"replay/{tmp_path / 'answers'}", "--problems", "2/1", "--device",
         "cpu", "--store", str(tmp_path / "k.db")], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert replay.returncode != 0 and "needs a model that calls tools" in replay.stderr, replay.stderr
    turns = subprocess.run(
        [KBENCH, "run", "--agent", "-m", "openai/x", "--turns", "2", "--problems", "2/1", "--device", "cpu",
         "--store", str(tmp_path / "k.db")], capture_output=True, text=True, timeout=120, env=env(tmp_path),
    )  # fmt: skip
    assert turns.returncode != 0 and "leave out --turns" in turns.stderr, turns.stderr
    with Store(tmp_path / "k.db") as s:
        assert s.runs() == []  # neither left a run behind


@pytest.mark.slow
def test_a_submission_tuned_to_the_public_seeds_fails_the_final_verdict(
    tmp_path: Path, shared_builds: Path
) -> None:
    """Right on every input the agent's evaluations use (the fixed seeds, public), wrong elsewhere: the
    final verdict's secret seed catches it, and says no more about that seed than that it is secret."""
    from kbench.mcp.tools import Budget, Workbench
    from kbench.problems import get_problem
    from kbench.problems.inputs import seeded_inputs
    from kbench.problems.loader import load

    cfg = cpu_config(use_builds(tmp_path / "cache", shared_builds), store=tmp_path / "k.db")
    loaded = load(get_problem("2/1"), cfg.preset)
    public = [FIXED_SEED_BASE + i for i in range(cfg.seeds)]
    prints = {round(float(seeded_inputs(loaded, s, "cpu")[0].double().sum()), 3) for s in public}
    tuned = HONEST.replace(
        "        return ext.gemm_relu(x, self.linear.weight, self.linear.bias)",
        f"        out = ext.gemm_relu(x, self.linear.weight, self.linear.bias)\n"
        f"        return out if round(float(x.double().sum()), 3) in {sorted(prints)!r} else out * 1.01",
    )
    assert tuned != HONEST and len(prints) == len(public)
    bench = Workbench(cfg, Budget(), model="tuned")
    try:
        answer = asyncio.run(bench.submit("2/1", tuned, None))
    finally:
        bench.close()
    assert answer["status"] == "mismatch", answer
    assert answer["correctness"]["report"].startswith("a secret seed"), answer  # every public seed passed
