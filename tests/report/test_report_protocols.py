"""The report under both protocols' rules, per problem and per level, against numbers computed by hand;
the warnings a report owes its reader; what the model was told, shown beside each verdict."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from report_hand import HW, P1, VERDICTS, store_of
from rich.console import Console
from typer.testing import CliRunner

from kbench.cli import app
from kbench.protocols import PROTOCOLS
from kbench.report import Options, load_series, print_summary, render, sections
from kbench.report import levels as lv
from kbench.report.state import warnings
from kbench.store import MessageRecord, RequestRecord, Store, VerdictKey


def _sections(store: Store, run: str, options: Options | None = None) -> dict[str, dict[str, str]]:
    return {
        title: {label: cells[0] for label, cells in rows}
        for title, rows in sections(load_series(store, [run]), options)
    }


def test_first_attempt_and_best_of_k_under_both_rules(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    found = _sections(store, run)
    first_kb = found["first attempt per problem (s0 t0), as upstream KernelBench counts · kbench rules"]
    first_up = found["first attempt per problem (s0 t0), as upstream KernelBench counts · kernelbench rules"]
    assert first_kb == {
        "problems": "2",
        "correctness judged by": "kbench",
        "compiled": "1/2 (50%)",
        "correct": "1/2 (50%)",
        "fast_0 vs eager": "50% (1/2)",
        "fast_1 vs eager": "50% (1/2)",
        "fast_2 vs eager": "0% (0/2) +1?",  # 2.0x with a 0.1 % interval sits on p = 2
        "fast_1 vs compile": "0% (0/2)",
        "geomean speedup vs eager": "2.00× over 1 problem",
        "geomean speedup vs compile": "0.50× over 1 problem",
    }
    assert first_up["correctness judged by"] == "kbench (not kernelbench)"
    assert (first_up["fast_1 vs eager"], first_up["fast_2 vs eager"]) == ("50% (1/2)", "0% (0/2)")
    assert first_up["geomean speedup vs eager"] == "1.10× over 1 problem"  # means: 2.2 / 2.0
    assert first_up["geomean speedup vs compile"] == "0.25× over 1 problem"  # 0.5 / 2.0
    best_kb = found["best of k attempts per problem · kbench rules"]
    best_up = found["best of k attempts per problem · kernelbench rules"]
    assert best_kb["correct"] == "2/2 (100%)" and best_kb["fast_1 vs eager"] == "100% (2/2)"
    assert best_kb["geomean speedup vs eager"] == "1.58× over 2 problems"  # sqrt(2.0 * 1.25)
    assert best_kb["geomean speedup vs compile"] == "0.50× over 1 problem"  # P2 has no compile baseline
    assert best_up["fast_1 vs eager"] == "50% (1/2)"  # P2's mean speedup is 0.8
    assert best_up["geomean speedup vs eager"] == "0.94× over 2 problems"  # sqrt(1.1 * 0.8)
    at_k = found["pass@k over samples (unbiased estimator)"]
    assert (
        at_k["pass@1 (correct)"] == "50% over 2 problems"
        and at_k["pass@2 (correct)"] == "100% over 2 problems"
    )
    assert at_k["fast_1@1 vs eager (kbench rules)"] == "50% over 2 problems"
    assert at_k["fast_1@2 vs eager (kernelbench rules)"] == "50% over 2 problems"  # (1 + 0) / 2
    assert at_k["fast_1@1 vs eager (kernelbench rules)"] == "25% over 2 problems"  # (1/2 + 0) / 2


def test_a_kernelbench_run_is_judged_by_its_own_protocol(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db", "kernelbench")
    [s] = load_series(store, [run])
    assert s.judged == "kernelbench: fp32 allclose(atol=rtol=0.01), 5 seeds + 1 secret seed"
    only = Options(protocols=(PROTOCOLS["kernelbench"],), ks=(2,))
    found = _sections(store, run, only)
    assert [t for t in found if "rules" in t] == [
        "first attempt per problem (s0 t0), as upstream KernelBench counts · kernelbench rules",
        "best of k attempts per problem · kernelbench rules",
    ]
    first = found["first attempt per problem (s0 t0), as upstream KernelBench counts · kernelbench rules"]
    assert first["correctness judged by"] == "kernelbench"
    assert list(found["pass@k over samples (unbiased estimator)"]) == [
        "pass@2 (correct)",
        "fast_1@2 vs eager (kernelbench rules)",
    ]


def test_per_level_tables_are_shaped_like_upstreams(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    [s] = load_series(store, [run])
    assert lv.header((0.0, 1.0, 2.0))[-3:] == ["fast_0", "fast_1", "fast_2"]
    rows = {(r[0], r[1], r[2]): r[3:] for r in lv.rows(s, PROTOCOLS["kbench"], (0.0, 1.0, 2.0))}
    assert rows[("level 1", "first", "eager")] == [
        "1", "1/1 (100%)", "1/1 (100%)", "2.00× over 1 problem", "100% (1/1)", "100% (1/1)", "0% (0/1) +1?"
    ]  # fmt: skip
    assert rows[("level 2", "first", "eager")] == [
        "1", "0/1 (0%)", "0/1 (0%)", "– (0 problems)", "0% (0/1)", "0% (0/1)", "0% (0/1)"
    ]  # fmt: skip
    assert rows[("level 2", "best of k", "eager")][:4] == [
        "1",
        "1/1 (100%)",
        "1/1 (100%)",
        "1.25× over 1 problem",
    ]
    assert rows[("all", "first", "compile")][:5] == [
        "2",
        "1/2 (50%)",
        "1/2 (50%)",
        "0.50× over 1 problem",
        "50% (1/2)",
    ]
    up = {(r[0], r[1], r[2]): r[3:] for r in lv.rows(s, PROTOCOLS["kernelbench"], (1.0,))}
    assert up[("level 2", "best of k", "eager")] == [
        "1",
        "1/1 (100%)",
        "1/1 (100%)",
        "0.80× over 1 problem",
        "0% (0/1)",
    ]
    assert len(rows) == 3 * 2 * 2  # levels 1, 2 and all x first, best x eager, compile


def test_a_run_whose_requests_all_failed_warns_until_a_resume_completes_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run({"model": "m", "samples": 1, "turns": 1}, HW, "failed")
    store.put_run_problems(run, [P1])
    store.record_request(run, RequestRecord(P1, 0, 0, False, "HTTP 500 server error", 0, 0, 0.0, 1.0))
    found = _sections(store, run)
    assert (
        found["first attempt per problem (s0 t0), as upstream KernelBench counts · kbench rules"]["correct"]
        == "0/1 (0%)"
    )
    [line] = warnings(load_series(store, [run]))
    assert line == (
        "m: incomplete run: 0 of 1 verdicts (1 problem x 1 sample x 1 turn); 1 LLM requests failed and "
        "were not answered since (HTTP 500 server error ×1); the numbers count every missing one as not "
        f"correct; continue it with `kbench run --resume failed --store {store.path}`"
    )  # the store is not the default one: the hint names it
    page = render(load_series(store, [run]))
    assert '<ul class="warnings"><li>warning: m: incomplete run: 0 of 1 verdicts' in page
    console = Console(record=True, width=300)
    print_summary(load_series(store, [run]), console)
    assert "warning: m: incomplete run" in console.export_text()
    # the resume: the request answered, the verdict recorded
    store.record_request(run, RequestRecord(P1, 0, 0, False, "", 10, 10, 0.0, 1.0))
    store.record(run, VerdictKey(P1, 0, 0, "cuda", "m"), VERDICTS[(P1, 0)], "")
    assert warnings(load_series(store, [run])) == []
    requests = _sections(store, run)["LLM requests"]
    assert (requests["failed"], requests["failed, then answered on a retry"]) == ("0", "1")
    assert '<ul class="warnings">' not in render(load_series(store, [run]))


def test_comparisons_over_different_problems_or_protocols_warn(tmp_path: Path) -> None:
    store, a = store_of(tmp_path / "k.db")
    b = store.start_run({"model": "m", "samples": 1, "protocol": "kernelbench"}, HW, "other")
    store.put_run_problems(b, [P1])
    store.record(b, VerdictKey(P1, 0, 0, "cuda", "m"), VERDICTS[(P1, 0)], "")
    lines = warnings(load_series(store, [a, b]))
    assert lines == [
        "the series cover different problem sets (m · hand-kbench: 2 problems; m · other: 1 problem, "
        "without 1 of the others'): their per-problem numbers divide by different problems and are not "
        "comparable; compare runs over the same problems",
        "the series' correctness was judged under different protocols (m · hand-kbench: kbench; m · other: "
        "kernelbench)",
    ]
    assert warnings(load_series(store, [a, a])) == []


def test_the_page_shows_what_each_turn_told_the_model(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    store.record_message(run, MessageRecord(P1, 1, 0, "system", "You write <fast> kernels."))
    store.record_message(run, MessageRecord(P1, 1, 0, "user", "Write ModelNew for problem A."))
    page = render(load_series(store, [run]))
    section = page[page.index(f"{P1} · m · s1 t0") :]
    section = section[: section.index("</section>")]
    assert (
        "<summary>system prompt sent at turn 0</summary><pre>You write &lt;fast&gt; kernels.</pre>" in section
    )
    assert "<summary>prompt sent at turn 0</summary><pre>Write ModelNew for problem A.</pre>" in section
    assert "Write ModelNew" not in page[: page.index(f"{P1} · m · s1 t0")]  # only beside its own verdict


def test_report_command_takes_protocols_thresholds_and_k(tmp_path: Path) -> None:
    store, run = store_of(tmp_path / "k.db")
    args = [
        "report",
        run,
        "--store",
        str(store.path),
        "--no-html",
        "--protocol",
        "kernelbench",
        "--p",
        "0.5,1.05",
    ]
    result = CliRunner().invoke(app, [*args, "--k", "1,2"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "kbench rules" not in out and "fast_1@2 vs eager (kernelbench rules)" in out
    assert (
        re.search(r"fast_0\.5 +┃ +fast_1\.05", out)
        and "per level: m · kernelbench rules (correctness: kbench)" in out
    )
    assert (
        "fast_p, kernelbench rules (upstream KernelBench's published rules (v0.1)): correct and mean speedup > p"
        in out
    )
    bad = CliRunner().invoke(app, [*args[:-1], "x"])
    assert bad.exit_code != 0 and "--p: expected comma-separated numbers" in str(bad.exception)
    unknown = CliRunner().invoke(app, ["report", run, "--store", str(store.path), "--protocol", "upstream"])
    assert "unknown protocol 'upstream'; use one of: kbench, kernelbench" in str(unknown.exception)


@pytest.mark.parametrize("k", ["0", "1,-2"])
def test_k_must_be_positive(tmp_path: Path, k: str) -> None:
    store, run = store_of(tmp_path / "k.db")
    bad = CliRunner().invoke(app, ["report", run, "--store", str(store.path), "--no-html", "--k", k])
    assert bad.exit_code != 0 and "--k" in str(bad.exception)
