"""Reference runs a run shares (host side): the pool's run of a problem for an evaluation, and a GPU
lane's prefetch of it while the candidate still builds (executors/local.py). evaluate/flow.py asks here
for a shared reference; evaluate/reference_pool.py keeps the runs.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from kbench.config import RunConfig, job_prefix, scratch_root
from kbench.evaluate.plan import Plan, evaluation_device, make_plan
from kbench.evaluate.reference_cache import ReferenceData
from kbench.evaluate.reference_pool import ReferencePool, pool_key
from kbench.evaluate.reference_run import get_reference
from kbench.problems.format import parse_problem
from kbench.problems.loader import preset_overrides
from kbench.store.reuse import reusable
from kbench.types import Problem, TimingStats


def prefetch_reference(
    problem: Problem,
    cfg: RunConfig,
    references: ReferencePool,
    baselines: Mapping[str, TimingStats] | None = None,
    done: set[tuple[str, str]] | None = None,
) -> dict[str, float] | None:
    """Run `problem`'s reference into `references` ahead of its candidate's evaluation, under the key
    that evaluation will ask for (`cfg` with the candidate's device and backend, the same `baselines`):
    the evaluation then finds it there. For a lane with nothing built to evaluate (executors/local.py);
    a failure is not kept in the pool, so the evaluation runs the reference again and reports it.

    `done`: the (problem key, device) pairs this caller has prefetched; each runs once, and is marked
    before it runs, so that a caller can tell its evaluation to wait for the run in the pool. Declined
    (nothing marked) while the pool holds half of what it may: a prefetch runs up to a round of builds
    ahead of its candidate, and one the pool evicted before its candidate came would run again.

    Returns the reference run's phases (sandbox and worker, as a verdict's `ref:` phases; the verdict
    that uses the run shows it shared), {} when the pool already held it, None when nothing ran."""
    if done is not None:
        if (problem.key, cfg.device) in done:
            return None
        if references.held_bytes() * 2 > references.max_bytes:
            return None  # the evaluation runs its reference itself, as without a prefetch
        done.add((problem.key, cfg.device))
    device = evaluation_device(cfg.device, cfg.backend)
    plan = make_plan(cfg, device)
    preset_overrides(problem, cfg.preset)
    reused = reused_baselines(baselines, cfg, plan, problem)
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(cfg)) as tmp:
        _, ref = pooled_reference(problem, cfg, plan, reused, references, Path(tmp))
    return dict(ref.phases)


def reused_baselines(
    baselines: Mapping[str, TimingStats] | None, cfg: RunConfig, plan: Plan, problem: Problem
) -> dict[str, TimingStats]:
    """The stored baselines that match the plan's device and timing settings (not timed again). A
    training problem's are timed in every run: the store keeps steps' times, not their forward passes'."""
    if not cfg.measure or parse_problem(problem.code, problem.path or problem.key).training is not None:
        return {}
    return reusable(baselines or {}, cfg.baselines, asdict(plan.settings), plan.device)


def pooled_reference(
    problem: Problem,
    cfg: RunConfig,
    plan: Plan,
    reused: Mapping[str, TimingStats],
    references: ReferencePool,
    workdir: Path,
) -> tuple[Plan, ReferenceData]:
    """The pool's plan and reference for this problem and settings: its run, made in `workdir` by the
    first evaluation (or prefetch) that asks, later ones reuse."""
    key = pool_key(problem, cfg, plan.device, reused.keys())
    plan, ref, _ = references.get(
        key, lambda: (plan, get_reference(problem, cfg, plan, workdir, skip=reused.keys())), group=problem.key
    )
    return plan, ref
