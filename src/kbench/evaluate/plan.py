"""What one evaluation runs: its device, seeds and timing settings, and the job a worker of it gets.

Seeds: `cfg.seeds` fixed ones, one per-run secret seed (secrets.randbelow) for correctness, and three more
secret seeds whose inputs are the timing sets (the reference computes their outputs every run, so sampled
outputs can be re-checked). Shared by the reference run (evaluate/reference_run.py), the candidate's run
and the verdict (evaluate/flow.py)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from kbench.backends import get_backend
from kbench.config import RunConfig
from kbench.sandbox.protocol import JobSpec
from kbench.types import Problem, TimingSettings

FIXED_SEED_BASE = 1000
REFERENCE_TIMING_SEEDS = [2000, 2001, 2002]
SAMPLE_COUNT = 8  # timed calls whose outputs are re-checked, drawn at random over the whole loop


@dataclass(frozen=True)
class Plan:
    device: str
    fixed: list[int]
    secret: list[int]
    timing: list[int]  # the candidate's timing input sets (secret)
    settings: TimingSettings = field(default_factory=TimingSettings)

    @property
    def checked(self) -> list[int]:
        """The correctness seeds: the fixed ones, then the secret one(s)."""
        return self.fixed + self.secret


def evaluation_device(device: str, backend: str) -> str:
    if device != "auto":
        return device
    if not get_backend(backend).gpu_kernels:  # C++ kernels run on the CPU
        return "cpu"
    from kbench.hardware import gpu_count

    return "cuda" if gpu_count() > 0 else "cpu"


def timing_settings(cfg: RunConfig, device: str) -> TimingSettings:
    """One procedure for the reference and the candidate; on the CPU fixed threads and a capped budget."""
    if device.startswith("cuda"):
        return TimingSettings(
            budget_s=cfg.timing_budget_s,
            batch=cfg.timing_batch,
            graph=cfg.timing_graph,
            hide_launch=cfg.timing_hide_launch,
            settled_warmup_s=TimingSettings.settled_warmup_s if cfg.timing_settled_warmup else 0.0,
            outlier_share=cfg.timing_outlier_share,
        )
    # CPU: 1 s per callable reaches the 0.5 % rse on small presets when nothing else runs; under load
    # the rse is reported instead of spending 5 s x 3 callables per verdict.
    budget = min(cfg.timing_budget_s, cfg.cpu_timing_budget_s)
    # the 0.2 s minimum is for GPU clocks' wander; CPU calls of the small presets are microseconds
    return TimingSettings(
        budget_s=budget,
        batch=cfg.timing_batch,
        threads=cfg.cpu_threads,
        min_time_s=0.05,
        outlier_share=cfg.timing_outlier_share,
    )


def make_plan(cfg: RunConfig, device: str) -> Plan:
    secret = secrets.randbelow(2**62)
    settings = timing_settings(cfg, device)
    return Plan(
        device=device,
        fixed=[FIXED_SEED_BASE + i for i in range(cfg.seeds)],
        secret=[secret],
        timing=[secret + 1, secret + 2, secret + 3],
        settings=settings,
    )


def job_spec(problem: Problem, cfg: RunConfig, plan: Plan, **kw: object) -> JobSpec:
    """A job for a worker: the run's settings and the plan's device and timing, plus `kw` (role, seeds...)."""
    return JobSpec(
        problem=problem,
        preset=cfg.preset,
        dtype=cfg.dtype,
        device=plan.device,
        init_seed=cfg.init_seed,
        timing=plan.settings,
        memory_limit_gb=cfg.memory_limit_gb,
        cache_dir=str(cfg.cache_dir),
        lease_wait_s=cfg.lease_wait_s,
        compile_arch=cfg.compile_arch,
        confine=cfg.confine,
        **kw,  # type: ignore[arg-type]
    )
