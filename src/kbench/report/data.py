"""What a report shows, read from the store only (no GPU, no API key): series of verdicts and summaries.

A series is one model in one run, so a report of several runs (or one run of several models) compares
them side by side.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kbench import metrics as m
from kbench.store import ProblemMeta, RunInfo, Store, StoredVerdict

_KEY_RE = re.compile(r":(\d+)/(\d+)$")
MODES = ("eager", "compile")
HEADLINE_P = (0.0, 1.0, 2.0)


@dataclass(frozen=True)
class Row:
    stored: StoredVerdict
    record: m.Record
    anchor: str  # HTML id of the verdict's details


@dataclass(frozen=True)
class Series:
    label: str
    run: RunInfo
    model: str
    rows: tuple[Row, ...]

    @property
    def verdicts(self) -> list[m.Verdict]:
        return [r.stored.verdict for r in self.rows]

    @property
    def records(self) -> list[m.Record]:
        return [r.record for r in self.rows]


@dataclass(frozen=True)
class Summary:
    n: int
    correct: int
    fast: dict[tuple[str, float], m.FastP]  # (mode, p) -> FastP
    geomean: dict[str, float | None]  # mode -> geomean over correct, timed verdicts
    geomean_fast: dict[str, float | None]  # mode -> geomean over verdicts fast at p=1
    sol_fraction: float | None
    pass_at_1: float | None
    generalization: tuple[int, int] = (0, 0)  # (checked at hidden sizes, correct there)


def _level(meta: ProblemMeta | None, key: str) -> int:
    if meta is not None:
        return meta.level
    match = _KEY_RE.search(key)
    return int(match.group(1)) if match else 0


def _record(s: StoredVerdict, meta: ProblemMeta | None) -> m.Record:
    k = s.key
    tags = meta.tags if meta else ()
    return m.Record(k.problem_key, s.verdict, k.model, k.sample, k.turn, _level(meta, k.problem_key), tags)


def load_series(store: Store, run_ids: Sequence[str], generalizes: str | None = None) -> list[Series]:
    """One series per (run, model), in the order the runs were given; with `generalizes` (a key of
    metrics.GENERALIZES) only the verdicts whose hidden-shape result it names."""
    if generalizes is not None:
        m.filter_generalizes([], generalizes)  # an unknown name fails before the store is read
    problems = store.problems()
    out: list[Series] = []
    for run_index, run_id in enumerate(run_ids):
        info = store.run(run_id)
        by_model: dict[str, list[Row]] = {}
        for i, s in enumerate(store.records(run_id)):
            rec = _record(s, problems.get(s.key.problem_key))
            if generalizes is not None and not m.filter_generalizes([rec], generalizes):
                continue
            by_model.setdefault(s.key.model, []).append(Row(s, rec, f"v{run_index}-{i}"))
        models = by_model or {str(info.config.get("model", "")): []}
        for model, rows in models.items():
            label = f"{model or '(no model)'} · {run_id}" if len(run_ids) > 1 or len(models) > 1 else model
            out.append(Series(label or run_id, info, model, tuple(rows)))
    return out


def summarize(series: Series) -> Summary:
    verdicts = series.verdicts
    fast = {(mode, p): m.fast_p(verdicts, p, mode) for mode in MODES for p in HEADLINE_P}
    counts = m.sample_counts(series.records)
    return Summary(
        n=len(verdicts),
        correct=sum(v.ok for v in verdicts),
        fast=fast,
        geomean={mode: m.geomean_speedup(verdicts, mode) for mode in MODES},
        geomean_fast={mode: m.geomean_speedup(verdicts, mode, only_fast=True) for mode in MODES},
        sol_fraction=m.mean_sol_fraction(verdicts),
        pass_at_1=m.mean_pass_at_k(counts, 1),
        generalization=m.generalization(verdicts),
    )


def fmt_x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def fmt_fast(f: m.FastP) -> str:
    text = f"{f.rate:.0%} ({f.fast}/{f.n})"
    return text + (f" +{f.uncertain}?" if f.uncertain else "")


def fmt_speedup(s: m.Speedup | None) -> str:
    if s is None:
        return "–"
    return f"{s.value:.2f}× [{s.low:.2f}, {s.high:.2f}]"
