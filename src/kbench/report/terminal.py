"""The terminal summary: where the numbers come from, the headline sections, per turn, per fusion pattern."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table

from kbench import metrics as m
from kbench.report.data import Series, fmt_fast
from kbench.report.summary import TURN_HEADER, rule, sections, turn_rows


def headline_table(series: Sequence[Series]) -> Table:
    """One row per metric and one column per series, so it stays readable in an 80-column terminal."""
    table = Table(title="kbench results", caption=rule(series), caption_justify="left")
    table.add_column("metric")
    for s in series:
        table.add_column(s.label, justify="right")
    for title, rows in sections(series):
        table.add_section()
        table.add_row(f"[bold]{title}[/]", *[""] * len(series))
        for label, cells in rows:
            table.add_row(f"  {label}", *cells)
    return table


def turn_table(s: Series) -> Table:
    table = Table(title=f"per turn: {s.label} (all samples of each turn)")
    for i, name in enumerate(TURN_HEADER):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in turn_rows(s):
        table.add_row(*row)
    return table


def tag_table(series: Sequence[Series]) -> Table:
    table = Table(title="per fusion pattern: correct/total, fast_1 vs eager (all verdicts)")
    table.add_column("tag")
    per = [m.breakdown(s.records, m.by_tag, lambda vs: vs) for s in series]
    for s in series:
        table.add_column(s.label)
    for tag in sorted({t for p in per for t in p}):
        cells = []
        for s, p in zip(series, per, strict=True):
            vs = p.get(tag)
            fast = "–" if vs is None else fmt_fast(m.fast_p(vs, 1.0, "eager", s.floor))
            cells.append("–" if vs is None else f"{sum(v.ok for v in vs)}/{len(vs)}, {fast}")
        table.add_row(tag, *cells)
    return table


def print_summary(series: Sequence[Series], console: Console) -> None:
    for s in series:
        console.print(
            f"{s.label or s.run.run_id}: numbers from {s.where} (run {s.run.run_id})", highlight=False
        )
    console.print(headline_table(series))
    for s in series:
        if s.turns > 1:
            console.print(turn_table(s))
    console.print(tag_table(series))
