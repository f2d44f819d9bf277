"""The HTML report's content: tables hold the expected rows, plots are inline, text is escaped."""

from __future__ import annotations

import re
from pathlib import Path

from report_fakes import MODELS, PROBLEMS
from rich.console import Console

from kbench.report import load_series, print_summary, render, summarize, write_html
from kbench.store import Store, VerdictKey
from kbench.types import Status, Verdict


def test_page_has_every_section_and_row(example: tuple[Store, list[str]], tmp_path: Path) -> None:
    store, runs = example
    page = write_html(store, runs, tmp_path / "r.html").read_text()
    assert page.count('class="headline-row"') == len(MODELS)
    assert page.count('class="problems-row"') == len(PROBLEMS)
    tags = {t for _, ts in PROBLEMS for t in ts}
    assert page.count('class="tags-row"') == len(tags)
    assert page.count('<section class="verdict"') == len(PROBLEMS) * len(MODELS)
    assert page.count("<svg") == 2 and "<polyline" in page and "<rect" in page
    for anchor in re.findall(r'href="#(v[\d-]+)"', page):
        assert f'id="{anchor}"' in page


def test_page_is_self_contained(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    page = render(load_series(store, runs))
    assert "<script" not in page and "<link" not in page
    assert re.findall(r"(?:src|href)=\"(?:https?:)?//", page) == []
    urls = set(re.findall(r"https?://[^\s\"'<]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}  # the SVG namespace is a name, never fetched


def test_candidate_text_is_escaped(tmp_path: Path) -> None:
    store = Store(tmp_path / "k.db")
    run = store.start_run({}, {"gpu": None, "cpu": "x", "device": "cpu"}, "r")
    v = Verdict(Status.MISMATCH, "kbench:2/1", "cpp", "small", "fp32", "cpu", message="<b>bad</b>")
    store.record(run, VerdictKey("kbench:2/1", 0, 0, "cpp", "m"), v, "</pre><script>alert(1)</script>")
    page = render(load_series(store, [run]))
    assert "<script>" not in page and "&lt;script&gt;alert(1)" in page and "&lt;b&gt;bad" in page


def test_summary_matches_metrics(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    [a, b] = load_series(store, runs)
    sa = summarize(a)
    assert sa.n == len(PROBLEMS) and sa.correct == sum(v.ok for v in a.verdicts)
    assert sa.fast[("eager", 0.0)].fast == sa.correct  # every correct fake verdict is timed
    assert a.label.startswith(MODELS[0]) and b.label.startswith(MODELS[1])


def test_terminal_summary(example: tuple[Store, list[str]]) -> None:
    store, runs = example
    console = Console(record=True, width=240)
    print_summary(load_series(store, runs), console)
    text = console.export_text()
    assert "fast_1 vs eager" in text and "gemm-epilogue" in text and MODELS[1] in text
    assert "geomean vs compile" in text
