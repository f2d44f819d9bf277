"""How many calls a timing loop runs, and in batches of how many (referee/timing.py): pure arithmetic on the
warm-up's measures (when it may end, a call's estimate, a batch's wall cost) and the settings."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from kbench.types import TimingSettings


def batch_size(per_call_s: float, settings: TimingSettings, cap: int) -> int:
    """Calls per batch: about `target_batch_s` of them, at least 1, at most `cap`."""
    if per_call_s <= 0:
        return max(1, min(cap, settings.max_batch))
    return max(1, min(cap, settings.max_batch, round(settings.target_batch_s / per_call_s)))


def loop_length(
    per_call_s: float, batch: int, settings: TimingSettings, checked: int, wall_per_call_s: float = 0.0
) -> int:
    """N: the loop's calls, a whole number of batches: `min_runs` batches, `min_time_s` of calls and
    `checked` calls at least; at most what the budget allows at `wall_per_call_s` of the referee's wall
    time per call (its own work included), never fewer than `checked`."""
    wanted = max(
        settings.min_runs * batch, math.ceil(settings.min_time_s / max(per_call_s, 1e-9) - 1e-6), checked
    )
    wall = max(per_call_s, wall_per_call_s, 1e-9)
    most = max(checked, int(settings.budget_s / wall * 0.8))
    calls = min(wanted, most) if most >= batch else wanted
    return max(batch, math.ceil(calls / batch) * batch)


@dataclass(frozen=True)
class BatchCost:
    """The referee's wall time for a batch of B calls, `fixed_s` + B x `per_call_s`: what every batch costs
    whatever its calls (the commands' round trips, the L2 flush, the snapshot's switch) and each call's share
    (its own time, its inputs made and compared, its outputs copied and checked)."""

    fixed_s: float
    per_call_s: float

    def wall(self, batch: int) -> float:
        return self.fixed_s + batch * self.per_call_s

    @classmethod
    def between(cls, one_s: float, batch: int, batch_s: float, call_s: float) -> BatchCost:
        """From a batch of one call (`one_s`) and one of `batch` calls (`batch_s`): the line through both,
        each call's share at least `call_s` (the call's own time), the fixed part never below nothing."""
        if batch <= 1:
            return cls(0.0, max(one_s, batch_s))
        per = max((batch_s - one_s) / (batch - 1), call_s, 1e-9)
        return cls(max(0.0, one_s - per), per)


def fit_batch(batch: int, cost: BatchCost, settings: TimingSettings) -> int:
    """A batch small enough that `min_runs` of them fit 80 % of the budget at `cost`: at least 1."""
    room_s = settings.budget_s * 0.8 / max(settings.min_runs, 1) - cost.fixed_s
    return max(1, min(batch, int(room_s / max(cost.per_call_s, 1e-9))))


def own_call(one: float, batch: int, per: float) -> float:
    """A call's own time from what a batch of one and a batch of `batch` charged per call (`one`, `per`):
    the line c + F/B through both, F what a batch costs past its calibration; at least a twentieth of
    `per`, should noise tilt the line (the next probe, with a batch that much longer, corrects it)."""
    if batch <= 1:
        return per
    return max((batch * per - one) / (batch - 1), per / 20)


def probe_size(call_s: float, settings: TimingSettings, cap: int) -> int:
    """The batch a probe runs (referee/timing.py `_probe`): what `call_s` asks, at least 2 while a call may
    be shorter than the target (a one-call batch under twice it carries its fixed costs in full)."""
    size = batch_size(call_s, settings, cap)
    return min(2, cap) if size == 1 and call_s < 2 * settings.target_batch_s else size


def warmed(times: list[float], elapsed: float, settings: TimingSettings, settled: Any) -> bool:
    """Whether the warm-up may end early: `settled_warmup_s` in, two windows of calls whose medians agree
    within 1 %, and the SM clock settled at its maximum (`settled`, NVML's test; None: never)."""
    k = settings.min_warmup
    if settled is None or settings.settled_warmup_s <= 0 or elapsed < settings.settled_warmup_s:
        return False
    if len(times) < 2 * k:
        return False
    return _level(times[-k:], times[-2 * k : -k]) and bool(settled(elapsed))


def _level(after: list[float], before: list[float], tolerance: float = 0.01) -> bool:
    a, b = statistics.median(before), statistics.median(after)
    return abs(b - a) <= tolerance * max(a, 1e-12)
