"""A training step's passes in the report: forward, backward and the step, each against each baseline.

A training problem's verdict times the whole step (its `timing` and `baselines`, what fast_p and the
headline use) and, beside it, the forward alone (`Verdict.forward`); the backward's time is the step's
less the forward's (`Verdict.pass_ms`). Here they become one line per verdict and one table per series
(the geometric mean of each pass's speedups over the ok training verdicts, with how many it covers).
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from kbench import metrics as m
from kbench.baselines.modes import TIMED_MODES
from kbench.types import Verdict

PASSES = ("forward", "backward", "step")


def trained(v: Verdict) -> bool:
    """Whether `v` is a training step's verdict with its passes timed."""
    return v.ok and bool(v.forward)


def pass_line(v: Verdict, pass_: str) -> str:
    """`forward 0.161 ms: 1.07x eager, 3.99x compile` ('' when the pass has no time)."""
    mine = v.pass_ms("candidate", pass_)
    if mine is None:
        return ""
    against = [f"{s:.2f}x {mode}" for mode in TIMED_MODES if (s := v.pass_speedup(pass_, mode)) is not None]
    return f"{pass_} {mine:.4g} ms" + (f": {', '.join(against)}" if against else "")


def pass_lines(v: Verdict) -> list[str]:
    """A training verdict's passes, one line each (none for any other verdict)."""
    return [line for p in PASSES if (line := pass_line(v, p))] if trained(v) else []


def pass_geomeans(verdicts: Sequence[Verdict]) -> dict[tuple[str, str], m.GeoMean]:
    """(pass, mode) -> the geometric mean of that pass's speedups over the ok training verdicts."""
    out = {}
    for pass_ in PASSES:
        for mode in TIMED_MODES:
            values = [s for v in verdicts if trained(v) and (s := v.pass_speedup(pass_, mode)) is not None]
            if values:
                out[(pass_, mode)] = m.geomean(values)
    return out


def passes_table(series: Sequence[tuple[str, Sequence[Verdict]]]) -> str:
    """The HTML section: per series, each pass's geometric-mean speedup against each baseline ('' when
    no series has a training verdict)."""
    rows = []
    for label, verdicts in series:
        found = pass_geomeans(verdicts)
        for pass_ in PASSES:
            cells = [found.get((pass_, mode)) for mode in TIMED_MODES]
            if any(c is not None for c in cells):
                shown = [f"{c.value:.2f}x (n={c.n})" if c is not None and c.value else "-" for c in cells]
                rows.append([escape(label), pass_, *shown])
    if not rows:
        return ""
    header = "".join(f"<th>{h}</th>" for h in ["series", "pass", *(f"vs {mode}" for mode in TIMED_MODES)])
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (
        "<h2 id='passes'>Training passes</h2><p class='note'>training problems: the geometric-mean speedup "
        "of the forward alone, the backward (the step's time less the forward's) and the whole step, over "
        "the ok verdicts whose passes were timed; n: how many</p>"
        f"<table><tr>{header}</tr>{body}</table>"
    )
