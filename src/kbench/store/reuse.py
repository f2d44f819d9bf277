"""Which stored baselines an evaluation may reuse, and the provenance every baseline carries.

Timing a reference costs ~1 s per mode in eager and ~10-20 s per torch.compile mode (its compile), per
problem, so an evaluation reuses a stored baseline instead of timing that mode again. Every baseline says
in its `provenance` where it came from (`source`: measured by this evaluation's reference job, read from
the reference disk cache, or reused from the results store, then with `stored_at`) and the timing settings
it was taken with (`timing_settings`, JSON). A stored baseline stands in for a measurement only when problem,
preset, dtype, mode, hardware fingerprint and torch version match (the store's key), and its device type
and recorded timing settings equal the evaluation's: a baseline timed with another budget, batch or
thread count is not comparable with the candidate's timing. Baselines without recorded settings
(imported upstream JSON, rows stored before settings were recorded) are therefore never reused.

The caller that holds the store looks baselines up (`baselines_for`); the evaluator only filters what it
is given (`reusable`) and never opens the store.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any

from kbench.config import RunConfig
from kbench.store.db import Store
from kbench.types import Provenance, TimingStats

MEASURED, CACHED, STORED = "measured", "cache", "store"  # the values of Provenance.source
SHARED = "run"  # measured by an earlier evaluation of the same run (reference_pool)


def settings_text(settings: Mapping[str, Any]) -> str:
    """Timing settings as they are recorded and compared: canonical JSON."""
    return json.dumps(dict(settings), sort_keys=True)


def annotate(
    stats: TimingStats,
    source: str | None = None,
    timing_settings: str | None = None,
    stored_at: str | None = None,
) -> TimingStats:
    """`stats` with the provenance facts given (not None) replacing those it had."""
    had = stats.provenance or Provenance()
    facts = Provenance(
        source=had.source if source is None else source,
        timing_settings=had.timing_settings if timing_settings is None else timing_settings,
        stored_at=had.stored_at if stored_at is None else stored_at,
    )
    return replace(stats, provenance=facts)


def source_of(stats: TimingStats) -> str | None:
    """Where a baseline came from (None for one recorded before baselines said so)."""
    if stats.provenance is None or not stats.provenance.source:
        return None
    return stats.provenance.source


def measured(
    timings: Mapping[str, TimingStats],
    settings: Mapping[str, Any],
    cache_hit: bool,
    shared: bool = False,
) -> dict[str, TimingStats]:
    """The reference job's timings (by mode) as stats that say how they were taken."""
    source = CACHED if cache_hit else SHARED if shared else MEASURED
    text = settings_text(settings)
    return {mode: annotate(stats, source=source, timing_settings=text) for mode, stats in timings.items()}


def reusable(
    stored: Mapping[str, TimingStats], modes: Collection[str], settings: Mapping[str, Any], device: str
) -> dict[str, TimingStats]:
    """The stored baselines an evaluation on `device` with timing `settings` may use instead of timing."""
    kind = device.split(":")[0]
    wanted = settings_text(settings)
    return {
        mode: stats
        for mode, stats in stored.items()
        if mode in modes
        and stats.device == kind
        and stats.provenance is not None
        and stats.provenance.timing_settings == wanted
    }


def lookup(
    store: Store, problem_key: str, preset: str, dtype: str, fingerprint: str, torch_version: str
) -> dict[str, TimingStats]:
    """Every stored baseline of one problem under these conditions, marked as reused from the store."""
    found = store.find_baselines(problem_key, preset, dtype, fingerprint, torch_version)
    return {mode: annotate(stats, source=STORED, stored_at=at) for mode, (stats, at) in found.items()}


def baselines_for(store: Store, problem_key: str, cfg: RunConfig) -> dict[str, TimingStats]:
    """What a caller holding the store passes to evaluate(): this machine's and this torch's baselines
    for the problem, or nothing when reuse is switched off or nothing is timed."""
    if not cfg.reuse_baselines or not cfg.measure:
        return {}
    import torch

    from kbench.hardware import fingerprint

    return lookup(store, problem_key, cfg.preset, cfg.dtype, fingerprint(), torch.__version__)
