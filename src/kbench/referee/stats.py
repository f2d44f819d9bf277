"""The timing loop's statistics (worker/timing.py): the summary of its calls and its stopping tests.

`summarize_times` is what a verdict records; `Running` keeps the mean's relative standard error in O(1)
per call for the loop's plain stopping test; `fenced_rse` is the same error over the calls inside
Tukey's far fences, for the loop's test that may leave a few held-up calls out (timing.py's module doc).
No torch here: plain numbers in milliseconds.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from typing import Any

from kbench.types import TimingStats


def summarize_times(
    samples_ms: Sequence[float], device: str, method: str, meaningful: bool = True, **extra: Any
) -> TimingStats:
    """Median, IQR, mean, std, min, n and relative standard error of the mean."""
    xs = sorted(samples_ms)
    n = len(xs)
    mean = statistics.fmean(xs)
    std = statistics.stdev(xs) if n > 1 else 0.0
    q = statistics.quantiles(xs, n=4) if n > 1 else [xs[0], xs[0], xs[0]]
    rse = std / math.sqrt(n) / mean if n > 1 and mean > 0 else 0.0
    return TimingStats(
        median_ms=statistics.median(xs),
        mean_ms=mean,
        std_ms=std,
        iqr_ms=q[2] - q[0],
        min_ms=xs[0],
        n=n,
        rse=rse,
        device=device,
        method=method,
        meaningful=meaningful,
        extra=tuple(sorted(extra.items())),
    )


class Running:
    """Mean and relative standard error of a growing sample in O(1) per value (Welford's update).

    The loop's stopping test ran `summarize_times` over every time so far after each call: 1.2 ms at 1,500
    calls and 3.7 ms at 5,000 on one core, which for a 0.13 ms kernel was most of the loop's wall time."""

    def __init__(self) -> None:
        self.n = 0
        self.mean = 0.0
        self._m2 = 0.0

    def add(self, x: float) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self._m2 += delta * (x - self.mean)

    @property
    def rse(self) -> float:
        if self.n < 2 or self.mean <= 0:
            return 0.0
        return math.sqrt(self._m2 / (self.n - 1)) / math.sqrt(self.n) / self.mean


FENCE_IQR = 3.0  # Tukey's far fences: "far out" beyond 3 IQR from the quartiles
FENCED_STEP = 1.1  # the fenced test runs again once the loop has 10 % more calls (it sorts them all)


def fenced_rse(times: Sequence[float]) -> tuple[float, int]:
    """The relative standard error of the mean of the calls inside Tukey's far fences, and how many calls
    fell outside them. With no spread between the quartiles every call off their value is outside."""
    xs = sorted(times)
    if len(xs) < 4:
        return math.inf, 0
    q1, _, q3 = statistics.quantiles(xs, n=4)
    reach = FENCE_IQR * (q3 - q1)
    lo, hi = bisect.bisect_left(xs, q1 - reach), bisect.bisect_right(xs, q3 + reach)
    kept = xs[lo:hi]
    mean = statistics.fmean(kept) if len(kept) > 1 else 0.0
    if mean <= 0:
        return math.inf, len(xs) - len(kept)
    return statistics.stdev(kept) / math.sqrt(len(kept)) / mean, len(xs) - len(kept)
