"""How many calls a timing loop runs, and in batches of how many (referee/timing.py): pure arithmetic on the
warm-up's estimate of a call and the settings."""

from __future__ import annotations

import math

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


def fit_batch(batch: int, per_call_wall_s: float, settings: TimingSettings) -> int:
    """A batch small enough that `min_runs` of them fit the budget, where the referee's own work per call
    (fresh inputs, checks) is what the wall time is made of: at least 1."""
    room = int(settings.budget_s * 0.8 / max(per_call_wall_s, 1e-9) / max(settings.min_runs, 1))
    return max(1, min(batch, room))
