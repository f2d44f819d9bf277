"""The terminal summary: the headline per series and the per-fusion-pattern breakdown (rich tables)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from kbench import metrics as m
from kbench.report.data import MODES, Series, fmt_fast, fmt_x, summarize


def headline_table(series: Sequence[Series]) -> Table:
    """One row per metric and one column per series, so it stays readable in an 80-column terminal."""
    table = Table(
        title="kbench results (fast_p: lower end of the 95 % speedup interval > p; +N? = uncertain)"
    )
    table.add_column("metric")
    summaries = [summarize(s) for s in series]
    for s in series:
        table.add_column(s.label, justify="right")
    table.add_row("verdicts", *[str(sm.n) for sm in summaries])
    table.add_row("correct", *[str(sm.correct) for sm in summaries])
    if any(sm.generalization[0] for sm in summaries):  # --hidden-shapes: correct at unseen sizes too
        table.add_row(
            "generalizes", *[f"{g}/{c} checked" for c, g in (sm.generalization for sm in summaries)]
        )
    for mode in MODES:
        for p in (0.0, 1.0, 2.0):
            table.add_row(f"fast_{p:g} vs {mode}", *[fmt_fast(sm.fast[(mode, p)]) for sm in summaries])
        table.add_row(f"geomean vs {mode}", *[fmt_x(sm.geomean[mode]) for sm in summaries])
    return table


def tag_table(series: Sequence[Series]) -> Table:
    table = Table(title="per fusion pattern: correct/total, fast_1 vs eager")
    table.add_column("tag")
    per = [m.breakdown(s.records, m.by_tag, lambda vs: vs) for s in series]
    for s in series:
        table.add_column(s.label)
    for tag in sorted({t for p in per for t in p}):
        cells = []
        for p in per:
            vs = p.get(tag)
            cells.append(
                "–" if vs is None else f"{sum(v.ok for v in vs)}/{len(vs)}, {fmt_fast(m.fast_p(vs, 1.0))}"
            )
        table.add_row(tag, *cells)
    return table


def print_summary(series: Sequence[Series], console: Console) -> None:
    console.print(headline_table(series))
    console.print(tag_table(series))
