"""The timing loop's statistics (referee/timing.py): the summary a verdict records. No torch here: plain
numbers in milliseconds, one per batch (its calls' mean)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from kbench.types import ClockFacts, LoopFacts, TimingStats


def summarize_times(
    samples_ms: Sequence[float],
    device: str,
    method: str,
    meaningful: bool = True,
    loop: LoopFacts | None = None,
    clock: ClockFacts | None = None,
) -> TimingStats:
    """Median, IQR, mean, std, min, n and relative standard error of the mean, with the loop's facts."""
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
        loop=loop,
        clock=clock,
    )
