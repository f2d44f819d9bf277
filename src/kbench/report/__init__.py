"""Reports read records only: a terminal summary and one self-contained HTML file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kbench.report.data import Options, Series, load_series
from kbench.report.html import render
from kbench.report.summary import Requests, requests_of, sections
from kbench.report.terminal import print_summary
from kbench.store import Store

__all__ = [
    "Options",
    "Requests",
    "Series",
    "load_series",
    "print_summary",
    "render",
    "requests_of",
    "sections",
    "write_html",
]


def write_html(
    store: Store,
    run_ids: Sequence[str],
    path: Path,
    floor: float | None = None,
    generalizes: str | None = None,
    options: Options | None = None,
) -> Path:
    """Render runs `run_ids` of `store` into one HTML file at `path` (`floor`, `generalizes`: see
    load_series; `options`: what the report shows besides the verdicts)."""
    series = load_series(store, run_ids, floor, generalizes)
    names = {key: meta.name for key, meta in store.problems().items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(series, names, options), encoding="utf-8")
    return path
