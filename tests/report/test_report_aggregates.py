"""What a report and an export owe their reader beside the numbers: fast_p@k at every threshold against
both baselines (computed by hand), the n of every aggregate, the statistic behind every speedup shown, the
warnings of an incomplete run on every output, clean messages, and every prompt the run stored."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from report_hand import HW, P1, P2, VERDICTS, store_of
from rich.console import Console
from typer.testing import CliRunner

from kbench.cli import app
from kbench.protocols import PROTOCOLS
from kbench.report import Options, Series, load_series, print_summary, render, sections
from kbench.report import at_k as ak
from kbench.report.state import warnings
from kbench.store import MessageRecord, RequestRecord, Store, VerdictKey
from kbench.types import BuildResult, Status, Verdict

FIXTURES = Path(__file__).parents[1] / "fixtures" / "feedback"
HOST_PATH = re.compile(r"(?<![\w.])(?:/|~/)[\w.+-]+/")
KERNELBENCH = PROTOCOLS["kernelbench"]


def _rows(s: Series, protocol: str) -> dict[tuple[str, str, str], list[str]]:
    found = ak.rows(s, PROTOCOLS[protocol], (0.2, 1.0, 2.0), (1, 2))
    return {(r[0], r[1], r[2]): r[3:] for r in found}


def test_fast_p_at_k_at_every_threshold_against_both_baselines(tmp_path: Path) -> None:
    """By hand (report_test_data): P1 (level 1) 2 samples, s0 correct with median speedups 2.0 vs eager
    (interval 0.1 %: fast at 1, uncertain at 2) and 0.5 vs compile, means 1.1 and 0.25; P2 (level 2) 2
    samples, s1 correct with median 1.25 and mean 0.8 vs eager, no compile baseline. A problem with c of n
    = 2 samples fast has fast_p@1 = c / 2, fast_p@2 = 1 if c else 0; the rows average over 1 problem per
    level and 2 in "all"."""
    store, run = store_of(tmp_path / "k.db")
    [s] = load_series(store, [run])
    assert ak.header((0.2, 1.0))[3:] == ["problems (≥ k samples)", "pass@k", "fast_0.2@k", "fast_1@k"]
    kb = _rows(s, "kbench")
    assert kb[("level 1", "1", "eager")] == ["1 of 1", "50%", "50%", "50%", "0%"]
    assert kb[("level 1", "2", "eager")] == ["1 of 1", "100%", "100%", "100%", "0%"]
    assert kb[("level 1", "1", "compile")] == ["1 of 1", "50%", "50%", "0%", "0%"]  # 0.5 > 0.2 only
    assert kb[("level 2", "2", "compile")] == ["1 of 1", "100%", "0%", "0%", "0%"]  # untimed: never fast
    assert kb[("all", "2", "eager")] == ["2 of 2", "100%", "100%", "100%", "0%"]
    up = _rows(s, "kernelbench")  # means: P1 1.1 (fast at 1), P2 0.8 (not)
    assert up[("all", "1", "eager")] == ["2 of 2", "50%", "50%", "25%", "0%"]  # (1/2 + 0) / 2 at p = 1
    assert up[("all", "2", "eager")] == ["2 of 2", "100%", "100%", "50%", "0%"]
    assert up[("level 1", "1", "compile")] == ["1 of 1", "50%", "50%", "0%", "0%"]  # 0.25 > 0.2 only
    assert len(kb) == 3 * 2 * 2  # levels 1, 2 and all x k = 1, 2 x eager, compile
    options = Options(protocols=(KERNELBENCH,), thresholds=(0.2, 1.0), ks=(1, 2))
    console = Console(record=True, width=300)
    print_summary([s], console, options)
    text = console.export_text()
    assert "pass@k and fast_p@k over samples: m · kernelbench rules (correctness: kbench)" in text
    assert re.search(r"│ all +│ 1 │ eager +│ +2 of 2 │ +50% │ +50% │ +25% │", text)
    page = render([s], options=options)
    assert "<h3>pass@k and fast_p@k over samples: m · kernelbench rules (correctness: kbench)</h3>" in page
    assert "<td>all</td><td>1</td><td>eager</td><td>2 of 2</td><td>50%</td><td>50%</td><td>25%</td>" in page


def test_every_aggregate_shows_its_n(example: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, runs = example
    series = load_series(store, runs[:1])
    ok = sum(v.ok for v in series[0].verdicts)  # every correct fake verdict has a speed-of-light time
    pooled = dict(dict(sections(series))["all verdicts pooled (samples and turns)"])
    assert re.fullmatch(rf"\d+% over {ok} verdicts", pooled["mean fraction of speed-of-light"][0])
    hand, run = store_of(tmp_path / "k.db")
    page = render(load_series(hand, [run]))
    assert ">m vs eager (n = 4)<" in page and ">m vs compile (n = 4)<" in page  # the fast_p chart's lines
    assert ">m (n = 2 timed of 4)<" in page  # the histogram: P1 s0 and P2 s1 have a speedup vs eager


def test_speedups_shown_say_their_statistic_under_kernelbench_rules(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    page = render(load_series(store, [run]), options=Options(protocols=(KERNELBENCH,)))
    problems = page[page.index("<h2 id='problems'>") :]
    assert problems.startswith("<h2 id='problems'>Per problem</h2><p class='note'>speedups: medians (kbench)")
    assert "<th>speedup vs eager (medians) [95 % CI]</th><th>vs compile (medians) [95 % CI]</th>" in problems
    assert "2.00× [" in problems  # P1 s0: the median speedup 2.0, not the mean 1.1
    histogram = page[page.index("<h2 id='distribution'>") : page.index("<h2 id='tags'>")]
    assert "speedups: medians (kbench)" in histogram and "speedup vs eager (medians, kbench)" in histogram


def _failed_run(path: Path) -> tuple[Store, str]:
    store = Store(path)
    run = store.start_run({"model": "m", "samples": 1, "turns": 1}, HW, "failed")
    store.put_run_problems(run, [P1])
    store.record_request(run, RequestRecord(P1, 0, 0, False, "HTTP 500 server error", 0, 0, 0.0, 1.0))
    return store, run


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "kernelbench"])
def test_export_of_an_incomplete_run_warns_on_stderr(tmp_path: Path, fmt: str) -> None:
    store, run = _failed_run(tmp_path / "k.db")
    out = ["--out", str(tmp_path / "out")] if fmt == "kernelbench" else []
    result = CliRunner().invoke(app, ["export", run, "--store", str(store.path), "--format", fmt, *out])
    assert result.exit_code == 0, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("warning: m: incomplete run: 0 of 1 verdicts (1 problem x 1 sample x 1 turn)")
    assert line.endswith(f"continue it with `kbench run --resume failed --store {store.path}`")
    stdout = {"csv": "run_id,problem_key,", "jsonl": "", "kernelbench": "wrote 0 files under"}[fmt]
    assert result.stdout.startswith(stdout) and "warning" not in result.stdout
    if fmt != "kernelbench":  # its one line may wrap at the terminal's width, by the path's length
        assert len(result.stdout.splitlines()) == (0 if fmt == "jsonl" else 1)  # csv: the header only


def test_export_warns_of_models_compared_over_different_problems(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run({"backend": "cuda"}, HW, "two-models")
    store.record(run, VerdictKey(P1, 0, 0, "cuda", "a"), VERDICTS[(P1, 0)], "")
    store.record(run, VerdictKey(P2, 1, 0, "cuda", "b"), VERDICTS[(P2, 1)], "")
    result = CliRunner().invoke(app, ["export", run, "--store", str(store.path), "--format", "csv"])
    assert result.exit_code == 0 and len(result.stdout.splitlines()) == 3
    assert result.stderr.startswith("warning: the series cover different problem sets")


def test_the_resume_hint_names_the_store_unless_it_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, run = _failed_run(Path("kbench-runs/kbench.db"))  # RunConfig's default store
    [line] = warnings(load_series(store, [run]))
    assert line.endswith("continue it with `kbench run --resume failed`")
    other, run = _failed_run(tmp_path / "my results" / "k.db")
    [line] = warnings(load_series(other, [run]))
    assert line.endswith(f"`kbench run --resume failed --store '{tmp_path}/my results/k.db'`")


def test_messages_are_cleaned_in_the_page_and_the_jsonl(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    message = (FIXTURES / "cpp_build_message.txt").read_text()
    log = (FIXTURES / "cpp_build_log.txt").read_text()
    assert message.startswith("td=c++20") and HOST_PATH.search(message)  # cut mid-token, with host paths
    broken = Verdict(Status.BUILD_ERROR, P2, "cpp", "small", "fp32", "cpu", message=message,
                     build=BuildResult(False, "cpp", log=log))  # fmt: skip
    store.record(run, VerdictKey(P2, 2, 0, "cpp", "m"), broken, "")
    page = render(load_series(store, [run]))
    section = page[page.index(f"{P2} · m · s2 t0") :]
    facts = section[: section.index("</p>")]
    assert "<b>build_error</b> · main.cpp:12:22: error: ‘bb’ was not declared in this scope" in facts
    assert HOST_PATH.search(facts) is None and "td=c++20" not in facts
    result = CliRunner().invoke(app, ["export", run, "--store", str(store.path), "--format", "jsonl"])
    [row] = [r for r in map(json.loads, result.stdout.splitlines()) if r["verdict"]["status"] == "build_error"
             and r["sample"] == 2]  # fmt: skip
    assert row["verdict"]["message"].startswith("main.cpp:12:22: error: ‘bb’ was not declared in this scope")
    assert HOST_PATH.search(row["verdict"]["message"]) is None
    assert row["verdict"]["build"]["log"] == log  # the other fields stay as stored


def test_the_page_shows_prompts_of_turns_without_a_verdict(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    store.record_message(run, MessageRecord(P1, 0, 1, "user", "Your kernel was slow; try again."))
    store.record_request(run, RequestRecord(P1, 0, 1, False, "HTTP 429 rate limited", 0, 0, 0.0, 1.0))
    store.record_message(run, MessageRecord(P2, 2, 0, "system", "You write kernels."))
    store.record_message(run, MessageRecord(P2, 2, 0, "user", "Write ModelNew for problem B."))
    page = render(load_series(store, [run]))
    first = page[page.index(f"{P1} · m · s0 t1 · no verdict") :]
    first = first[: first.index("</section>")]
    assert "no verdict: the LLM request failed (HTTP 429 rate limited)" in first
    assert "<summary>feedback sent at turn 1</summary><pre>Your kernel was slow; try again.</pre>" in first
    second = page[page.index(f"{P2} · m · s2 t0 · no verdict") :]
    second = second[: second.index("</section>")]
    assert "<p>no verdict stored</p>" in second
    assert "<summary>system prompt sent at turn 0</summary><pre>You write kernels.</pre>" in second
    assert "<summary>prompt sent at turn 0</summary><pre>Write ModelNew for problem B.</pre>" in second
