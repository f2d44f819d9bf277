"""`kbench baseline`'s timer: the reference in eager and torch.compile modes, in the trusted reference worker.

The same worker and timing function that produce every verdict's baselines, so stored baselines and
verdicts are comparable.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from kbench.config import RunConfig
from kbench.errors import ConfigError
from kbench.evaluate import _stats, make_plan, resolve_device, run_reference
from kbench.reference import COMPILE_MODES
from kbench.types import Problem, TimingStats


def time_baselines(
    problem: Problem, preset: str, dtype: str, modes: Sequence[str], cfg: RunConfig | None = None
) -> dict[str, TimingStats]:
    """Time the reference in `modes` (eager, compile, compile-max-autotune) in the trusted reference worker,
    with the same timing function candidates get; `kbench baseline` stores the result."""
    unknown = [m for m in modes if m not in COMPILE_MODES]
    if unknown:
        raise ConfigError(f"unknown baseline mode(s) {unknown}; choose from {', '.join(COMPILE_MODES)}")
    cfg = (cfg or RunConfig()).model_copy(
        update={"preset": preset, "dtype": dtype, "baselines": list(modes), "measure": True}
    )
    plan = make_plan(cfg, resolve_device(cfg.device, "cuda"))
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbench-baseline-", dir=cfg.cache_dir) as tmp:
        ref = run_reference(problem, cfg, plan, Path(tmp))
    stats = {m: _stats(d) for m, d in ref.timings.items() if m in modes}
    return {m: s for m, s in stats.items() if s is not None}
