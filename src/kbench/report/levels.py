"""Per-level tables shaped like upstream KernelBench's analysis (scripts/benchmark_eval_analysis.py prints,
per level: problems, compiled, correct, the geometric-mean speedup of the correct ones and fast_p at a list
of thresholds), for the first attempt and the best of k, against eager and torch.compile.

Every count divides by the problems the run selected at that level; a problem without a verdict is not
compiled, not correct and not fast (upstream's analysis patches a missing problem in the same way).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kbench import metrics as m
from kbench.protocols import Protocol
from kbench.report.data import MODES, Series, fmt_fast, fmt_geomean
from kbench.report.summary import count

ATTEMPTS = ("first", "best of k")


def header(thresholds: Sequence[float]) -> list[str]:
    return [
        "level", "attempt", "vs", "problems", "compiled", "correct", "geomean speedup",
        *(f"fast_{p:g}" for p in thresholds),
    ]  # fmt: skip


def groups(s: Series) -> list[tuple[str, list[str]]]:
    """(name, selected problems) per level, then every level together when there are several."""
    by: dict[int, list[str]] = {}
    for key in s.problems:
        by.setdefault(s.level_of(key), []).append(key)
    per_level = [(f"level {level}", by[level]) for level in sorted(by)]
    return per_level + ([("all", list(s.problems))] if len(per_level) > 1 else [])


def _attempts(records: Sequence[m.Record], attempt: str) -> dict[str, list[m.Verdict]]:
    """Each problem's verdicts that `attempt` looks at: its first attempt only, or all k."""
    if attempt == "first":
        return {k: [v] for k, v in m.first_attempts(records).items()}
    return m.by_problem(records)


def _counts(keys: Sequence[str], chosen: dict[str, list[m.Verdict]], ok: Callable[[m.Verdict], bool]) -> int:
    return sum(any(ok(v) for v in chosen.get(k, [])) for k in keys)


def rows(s: Series, protocol: Protocol, thresholds: Sequence[float]) -> list[list[str]]:
    """One row per level x attempt (first, best of k) x baseline mode."""
    rule, out = s.rule(protocol), []
    for name, keys in groups(s):
        records = [r for r in s.records if r.problem_key in set(keys)]
        for attempt in ATTEMPTS:
            chosen = _attempts(records, attempt)
            compiled = count(_counts(keys, chosen, m.compiled), len(keys))
            correct = count(_counts(keys, chosen, lambda v: v.ok), len(keys))
            fast = m.first_fast_p if attempt == "first" else m.best_fast_p
            mean = m.first_geomean if attempt == "first" else m.best_geomean
            for mode in MODES:
                cells = [fmt_fast(fast(records, keys, p, mode, rule)) for p in thresholds]
                g = fmt_geomean(mean(records, keys, mode, rule.statistic))
                out.append([name, attempt, mode, str(len(keys)), compiled, correct, g, *cells])
    return out


def title(s: Series, protocol: Protocol) -> str:
    return f"per level: {s.label or s.run.run_id} · {protocol.name} rules (correctness: {s.protocol.name})"
