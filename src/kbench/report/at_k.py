"""pass@k and fast_p@k per level, laid out as the per-level tables are (levels.py): one row per level x k x
baseline (eager, torch.compile), one fast_p@k column per threshold p of the report.

Both are the unbiased estimator over samples (a sample passes when one of its turns does: metrics.py),
averaged over the problems with at least k samples; the `problems` column gives that n beside the
problems the run selected at the level.
"""

from __future__ import annotations

from collections.abc import Sequence

from kbench import metrics as m
from kbench.protocols import Protocol
from kbench.report.data import MODES, Series, fmt_rate
from kbench.report.levels import groups


def header(thresholds: Sequence[float]) -> list[str]:
    return ["level", "k", "vs", "problems (≥ k samples)", "pass@k", *(f"fast_{p:g}@k" for p in thresholds)]


def rows(s: Series, protocol: Protocol, thresholds: Sequence[float], ks: Sequence[int]) -> list[list[str]]:
    """One row per level x k x baseline mode, under `protocol`'s fast_p rule."""
    rule, out = s.rule(protocol), []
    for name, keys in groups(s):
        records = [r for r in s.records if r.problem_key in set(keys)]
        counts = m.sample_counts(records)
        passed = {k: m.at_k(counts, k) for k in ks}
        for k in ks:
            n = f"{passed[k].n} of {len(keys)}"
            for mode in MODES:
                cells = [fmt_rate(m.fast_p_at_k(records, k, p, mode, rule).value) for p in thresholds]
                out.append([name, str(k), mode, n, fmt_rate(passed[k].value), *cells])
    return out


def title(s: Series, protocol: Protocol) -> str:
    return (
        f"pass@k and fast_p@k over samples: {s.label or s.run.run_id} · {protocol.name} rules "
        f"(correctness: {s.protocol.name})"
    )
