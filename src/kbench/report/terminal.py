"""The terminal summary: where the numbers come from, warnings, the headline sections, per level (shaped
like upstream KernelBench's analysis), per turn, per fusion pattern."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kbench import metrics as m
from kbench.report import at_k, levels, transcripts
from kbench.report.data import Options, Series, fmt_fast
from kbench.report.state import warnings
from kbench.report.summary import TURN_HEADER, ks_of, rules, sections, turn_rows


def headline_table(series: Sequence[Series], options: Options) -> Table:
    """One row per metric and one column per series, so it stays readable in an 80-column terminal."""
    table = Table(title="kbench results", caption="\n".join(rules(series, options)), caption_justify="left")
    table.add_column("metric")
    for s in series:
        table.add_column(s.label, justify="right")
    for title, rows in sections(series, options):
        table.add_section()
        table.add_row(f"[bold]{escape(title)}[/]", *[""] * len(series))
        for label, cells in rows:
            table.add_row(f"  {escape(label)}", *cells)
    return table


def level_table(s: Series, options: Options, index: int) -> Table:
    protocol = options.protocols[index]
    table = Table(title=levels.title(s, protocol))
    for i, name in enumerate(levels.header(options.thresholds)):
        table.add_column(name, justify="left" if i < 3 else "right")
    for row in levels.rows(s, protocol, options.thresholds):
        table.add_row(*row)
    return table


def at_k_table(s: Series, options: Options, index: int) -> Table:
    protocol = options.protocols[index]
    table = Table(title=at_k.title(s, protocol))
    for i, name in enumerate(at_k.header(options.thresholds)):
        table.add_column(name, justify="left" if i < 3 else "right")
    for row in at_k.rows(s, protocol, options.thresholds, ks_of(s, options)):
        table.add_row(*row)
    return table


def turn_table(s: Series, options: Options) -> Table:
    protocol = options.protocols[0]
    table = Table(title=f"per turn: {s.label} (all samples of each turn) · {protocol.name} rules")
    for i, name in enumerate(TURN_HEADER):
        table.add_column(name, justify="left" if i == 0 else "right")
    for row in turn_rows(s, protocol):
        table.add_row(*row)
    return table


def tag_table(series: Sequence[Series], options: Options) -> Table:
    protocol = options.protocols[0]
    table = Table(
        title=f"per fusion pattern: correct/total, fast_1 vs eager (all verdicts) · {protocol.name} rules"
    )
    table.add_column("tag")
    per = [m.breakdown(s.records, m.by_tag, lambda vs: vs) for s in series]
    for s in series:
        table.add_column(s.label)
    for tag in sorted({t for p in per for t in p}):
        cells = []
        for s, p in zip(series, per, strict=True):
            vs = p.get(tag)
            fast = "–" if vs is None else fmt_fast(m.fast_p(vs, 1.0, "eager", s.rule(protocol)))
            cells.append("–" if vs is None else f"{sum(v.ok for v in vs)}/{len(vs)}, {fast}")
        table.add_row(tag, *cells)
    return table


def print_summary(series: Sequence[Series], console: Console, options: Options | None = None) -> None:
    options = options or Options()
    for s in series:
        console.print(
            f"{s.label or s.run.run_id}: numbers from {s.where} (run {s.run.run_id}); correctness judged "
            f"under {s.judged}",
            highlight=False,
            markup=False,
        )
    for line in warnings(series):
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False)
    console.print(headline_table(series, options))
    for s in series:
        for i in range(len(options.protocols)):
            console.print(level_table(s, options, i))
        for i in range(len(options.protocols)):
            console.print(at_k_table(s, options, i))
        if s.turns > 1:
            console.print(turn_table(s, options))
    console.print(tag_table(series, options))
    for s in series:
        if s.transcript:
            console.print(transcripts.effort_line(s.label, s.transcript, s.solved), highlight=False)
