"""What a report says before its numbers: runs that are not complete, and comparisons that are not like
for like. Numbers over a run with missing verdicts count the missing ones as not correct, and a side by
side of two runs over different problems, protocols or conditions compares different things; both look
like results unless the report says so."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from kbench.report.data import Series
from kbench.report.summary import requests_of


def _name(s: Series) -> str:
    return s.label or s.run.run_id


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("s" if count != 1 else "")


def incomplete(s: Series) -> list[str]:
    """A line when a run holds fewer verdicts than it set out to make (empty when it is complete)."""
    have = {r.record.problem_key for r in s.rows}
    missing = [k for k in s.problems if k not in have]
    failed = requests_of(s)
    why = ""
    if failed.failed:
        kinds = ", ".join(f"{k} ×{n}" for k, n in failed.failures)
        why = f"; {failed.failed} LLM requests failed and were not answered since ({kinds})"
    store = f" --store {shlex.quote(str(s.store))}" if s.store is not None else ""
    resume = f"; continue it with `kbench run --resume {s.run.run_id}{store}`"
    expected = s.expected
    if expected is not None and len(s.rows) < expected:
        size = f"{_n(len(s.problems), 'problem')} x {_n(s.samples, 'sample')} x {_n(s.turns, 'turn')}"
        return [
            f"{_name(s)}: incomplete run: {len(s.rows)} of {expected} verdicts ({size}){why}; the numbers "
            f"count every missing one as not correct{resume}"
        ]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        return [
            f"{_name(s)}: {len(missing)} of {len(s.problems)} selected problems have no verdict ({shown})"
            f"{why}; the numbers count them as not correct{resume}"
        ]
    return []


def mismatched(series: Sequence[Series]) -> list[str]:
    """Lines for series compared side by side over different problems, protocols or conditions."""
    if len(series) < 2:
        return []
    out = []
    sets = [set(s.problems) for s in series]
    if any(x != sets[0] for x in sets):
        every = set().union(*sets)
        detail = "; ".join(
            f"{_name(s)}: {_n(len(x), 'problem')}"
            + (f", without {len(every - x)} of the others'" if every - x else "")
            for s, x in zip(series, sets, strict=True)
        )
        out.append(
            f"the series cover different problem sets ({detail}): their per-problem numbers divide by "
            "different problems and are not comparable; compare runs over the same problems"
        )
    if len({s.protocol.name for s in series}) > 1:
        judged = "; ".join(f"{_name(s)}: {s.protocol.name}" for s in series)
        out.append(f"the series' correctness was judged under different protocols ({judged})")
    if len({s.where for s in series}) > 1:
        where = "; ".join(f"{_name(s)}: {s.where}" for s in series)
        out.append(f"the series' numbers come from different conditions ({where})")
    return out


def warnings(series: Sequence[Series]) -> list[str]:
    return [line for s in series for line in incomplete(s)] + mismatched(series)
