"""`kbench baseline`'s timer: the reference in eager and torch.compile modes, in the trusted reference worker.

The same worker and timing function that produce every verdict's baselines, so stored baselines and
verdicts are comparable; each stored baseline records its timing settings, which evaluation compares
before reusing it (store/reuse.py).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from kbench.backends import default_backend
from kbench.baselines.modes import check_modes
from kbench.config import RunConfig, job_prefix, resolve, scratch_root
from kbench.evaluate.plan import evaluation_device, make_plan
from kbench.evaluate.reference_run import get_reference
from kbench.store.reuse import measured
from kbench.types import Problem, TimingStats


def time_baselines(
    problem: Problem, preset: str, dtype: str, modes: Sequence[str], cfg: RunConfig | None = None
) -> dict[str, TimingStats]:
    """Time the reference in `modes` (eager, compile, compile-max-autotune) in the trusted reference worker,
    with the same timing function candidates get; `kbench baseline` stores the result. Without `cfg`, the
    defaults and KBENCH_* environment `kbench run` also resolves, so the timing settings agree."""
    check_modes(modes, timed=True)
    cfg = (cfg or resolve()).model_copy(
        update={"preset": preset, "dtype": dtype, "baselines": list(modes), "measure": True}
    )
    # `auto`: the GPU where there is one, as a GPU backend's evaluation would take it
    plan = make_plan(cfg, evaluation_device(cfg.device, default_backend(gpu=True)))
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(cfg)) as tmp:
        ref = get_reference(problem, cfg, plan, Path(tmp))
    stats = measured(ref.timings, asdict(plan.settings), ref.cache_hit)
    return {m: s for m, s in stats.items() if m in modes}
