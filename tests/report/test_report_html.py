"""The report's content: sections hold the expected rows and numbers, plots are inline, text is escaped."""

from __future__ import annotations

import re
from pathlib import Path

from report_fakes import LATENCIES, MISSING, MODELS, PROBLEMS
from rich.console import Console

from kbench import metrics as m
from kbench.report import load_series, print_summary, render, requests_of, sections, write_html
from kbench.store import RequestRecord, Store, VerdictKey
from kbench.types import Status, TimingStats, Verdict

TITLES = ["first attempt per problem", "best of k", "pass@k", "all verdicts pooled", "LLM requests"]


def _rows(store: Store, runs: list[str]) -> dict[str, dict[str, list[str]]]:
    """{section title's first words: {label: cells}}"""
    out = {}
    for title, rows in sections(load_series(store, runs)):
        key = next(t for t in TITLES if title.startswith(t))
        out.setdefault(key, dict(rows))  # the kbench rules come first
    return out


def test_page_has_every_section_and_row(example: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, runs = example
    page = write_html(store, runs, tmp_path / "r.html").read_text()
    rows = sum(len(r) for _, r in sections(load_series(store, runs)))
    assert page.count('class="headline-row"') == rows and all(t in page for t in TITLES)
    assert page.count('class="problems-row"') == len(PROBLEMS)
    tags = {t for _, ts in PROBLEMS for t in ts}
    assert page.count('class="tags-row"') == len(tags)
    assert page.count('<section class="verdict"') == len(PROBLEMS) * len(MODELS)
    assert page.count("<svg") == 2 and "<polyline" in page and "<rect" in page
    assert page.count("<b>GPU NVIDIA H200, full, fp32</b>") == len(MODELS)  # where the numbers come from
    for anchor in re.findall(r'href="#(v[\d-]+)"', page):
        assert f'id="{anchor}"' in page


def test_page_is_self_contained(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    page = render(load_series(store, runs))
    assert "<script" not in page and "<link" not in page
    assert re.findall(r"(?:src|href)=\"(?:https?:)?//", page) == []
    urls = set(re.findall(r"https?://[^\s\"'<]+", page))
    # the SVG namespace is a name, never fetched; the other is a failed request's reason, as text
    assert urls <= {"http://www.w3.org/2000/svg", "http://127.0.0.1:9/v1"}


def test_candidate_text_is_escaped(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run({}, {"gpu": None, "cpu": "x", "device": "cpu"}, "r")
    v = Verdict(Status.MISMATCH, "kbench:2/1", "cpp", "small", "fp32", "cpu", message="<b>bad</b>")
    store.record(run, VerdictKey("kbench:2/1", 0, 0, "cpp", "m"), v, "</pre><script>alert(1)</script>")
    page = render(load_series(store, [run]))
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in page and "&lt;b&gt;bad" in page
    assert "<b>CPU, small, fp32</b>" in page


def test_per_problem_rows_divide_by_the_selected_problems(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    [a, b] = load_series(store, runs)
    rows = _rows(store, runs)
    first = rows["first attempt per problem"]
    ok_a, ok_b = sum(v.ok for v in a.verdicts), sum(v.ok for v in b.verdicts)
    assert first["problems"] == [str(len(PROBLEMS) + 1), str(len(PROBLEMS))]  # model-a selected one more
    assert first["correct"][0] == f"{ok_a}/{len(PROBLEMS) + 1} ({ok_a / (len(PROBLEMS) + 1):.0%})"
    assert first["correct"][1] == f"{ok_b}/{len(PROBLEMS)} ({ok_b / len(PROBLEMS):.0%})"
    fast = m.first_fast_p(a.records, a.problems, 1.0)
    assert fast.n == len(PROBLEMS) + 1 and MISSING in a.problems
    assert first["fast_1 vs eager"][0] == f"{fast.rate:.0%} ({fast.fast}/{fast.n})" + (
        f" +{fast.uncertain}?" if fast.uncertain else ""
    )
    pooled = rows["all verdicts pooled"]
    assert pooled["verdicts"] == [str(len(PROBLEMS))] * 2  # pooling counts verdicts, not problems
    assert rows["best of k"]["k = samples × turns"] == ["1 × 1"] * 2
    assert (
        rows["pass@k"]["pass@1 (correct)"][0] == f"{ok_a / len(PROBLEMS):.0%} over {len(PROBLEMS)} problems"
    )


def test_requests_tokens_cost_latency_and_failures(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    [a, b] = load_series(store, runs)
    r = requests_of(a)
    assert (r.sent, r.cached, r.failed) == (len(PROBLEMS) + 2, 2, 2)
    assert r.failures == (("HTTP 429 rate limited", 1), ("connection refused by http://127.0.0.1:9/v1", 1))
    assert (r.input_tokens, r.output_tokens) == (1000 * len(PROBLEMS), 500 * len(PROBLEMS))
    assert abs(r.cost_usd - 0.0075 * len(PROBLEMS)) < 1e-9
    assert sorted(LATENCIES)[-1] == 15.0 and r.latency == (8.5, 14.0, 15.0)  # median, p90, max
    assert requests_of(b).sent == 0
    cells = _rows(store, runs)["LLM requests"]
    assert (
        cells["failed"][0] == "2 (HTTP 429 rate limited ×1, connection refused by http://127.0.0.1:9/v1 ×1)"
    )
    assert (
        cells["cost"][0] == "$0.1050"
        and cells["latency median / p90 / max"][0] == "8.50 s / 14.00 s / 15.00 s"
    )


def test_uncertain_speedups_are_never_fast(tmp_path: Path) -> None:
    """1.001x with a tight interval (the reference run, then a copy kernel) is uncertain at 1, not fast."""
    store = Store(tmp_path / "k.db")
    run = store.start_run({"model": "m", "samples": 1}, {"gpu": None, "cpu": "x"}, "r")
    t = TimingStats(1.0, 1.0, 0.0, 0.0, 1.0, 200, 0.0001, device="cpu")
    base = TimingStats(1.001, 1.001, 0.0, 0.0, 1.0, 200, 0.0001, device="cpu")
    v = Verdict(
        Status.OK, "kbench:2/1", "cpp", "small", "fp32", "cpu", timing=t, baselines=(("eager", base),)
    )
    store.record(run, VerdictKey("kbench:2/1", 0, 0, "cpp", "m"), v, "")
    rows = _rows(store, [run])
    assert rows["first attempt per problem"]["fast_1 vs eager"] == ["0% (0/1) +1?"]
    assert rows["first attempt per problem"]["fast_0 vs eager"] == ["100% (1/1)"]
    assert _rows_with_floor(store, run, 0.0)["fast_1 vs eager"] == ["100% (1/1)"]  # `report --noise-floor 0`


def _rows_with_floor(store: Store, run: str, floor: float) -> dict[str, list[str]]:
    title, rows = sections(load_series(store, [run], floor))[0]
    return dict(rows)


def test_per_turn_tables(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run({"model": "m", "turns": 2}, {"gpu": None, "cpu": "x"}, "r")
    for turn, status in ((0, Status.MISMATCH), (1, Status.OK)):
        v = Verdict(status, "kbench:2/1", "cpp", "small", "fp32", "cpu")
        store.record(run, VerdictKey("kbench:2/1", 0, turn, "cpp", "m"), v, "")
    store.record_request(run, RequestRecord("kbench:2/1", 0, 0, False, "", 10, 5, 0.0, 1.0))
    page = render(load_series(store, [run]))
    assert page.count('class="turns-row"') == 2 and "<td>turn 1</td><td>1</td><td>1/1 (100%)</td>" in page
    console = Console(record=True, width=120)
    print_summary(load_series(store, [run]), console)
    text = console.export_text()
    assert "per turn: m" in text and re.search(r"turn 0 +│ +1 +│ +0/1 \(0%\)", text)


def test_terminal_summary(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    console = Console(record=True, width=240)
    print_summary(load_series(store, runs), console)
    text = console.export_text()
    assert "fast_1 vs eager" in text and "gemm-epilogue" in text and MODELS[1] in text
    assert "geomean speedup vs compile" in text and "numbers from GPU NVIDIA H200, full, fp32" in text
    assert all(t in text for t in TITLES) and "noise floor 1.0%" in text
