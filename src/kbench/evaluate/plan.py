"""What one evaluation runs: its device, seeds and timing settings, and the job a worker of it gets.

Seeds: `cfg.seeds` fixed ones and one per-run secret seed (secrets.randbelow) for correctness; the timing
loop's calls get fresh inputs each, drawn by the candidate's referee, which also draws which of them it
checks (referee/checks.py). Shared by the reference run (evaluate/reference_run.py), the candidate's run and the
verdict (evaluate/flow.py)."""

from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, field

from kbench.backends import get_backend
from kbench.baselines.modes import get_mode
from kbench.config import FIXED_SEED_BASE, RunConfig
from kbench.sandbox import isolate
from kbench.sandbox.protocol import JobSpec
from kbench.types import CPU_SAMPLE_PERIOD_NS, JobRole, Problem, TimingSettings


@dataclass(frozen=True)
class Plan:
    device: str
    fixed: list[int]
    secret: list[int]
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
            settled_warmup_s=TimingSettings.settled_warmup_s if cfg.timing_settled_warmup else 0.0,
            target_batch_s=cfg.timing_batch_ms / 1e3,
        )
    # CPU: 1 s per callable reaches the 0.5 % rse on small presets when nothing else runs; under load
    # the rse is reported instead of spending 5 s x 3 callables per verdict.
    budget = min(cfg.timing_budget_s, cfg.cpu_timing_budget_s)
    # the 0.2 s minimum is for GPU clocks' wander; CPU calls of the small presets are microseconds
    # and a CPU batch runs 20 ms: what its command's round trip costs (0.5-1 ms on two cores) is
    # deducted by the loop's calibration (referee/calibrate.py)
    return TimingSettings(
        budget_s=budget,
        threads=cfg.cpu_threads,
        min_time_s=0.05,
        min_runs=10,
        warmup_s=0.05,
        target_batch_s=max(cfg.timing_batch_ms / 1e3, 0.02),
        # a native candidate's share is sampled, and so the reference's loop (referee/cpushare.py)
        sample_period_ns=CPU_SAMPLE_PERIOD_NS if get_backend(cfg.backend).prebuilds else 0,
    )


def make_plan(cfg: RunConfig, device: str) -> Plan:
    secret = secrets.randbelow(2**62)
    settings = timing_settings(cfg, device)
    return Plan(
        device=device,
        fixed=[FIXED_SEED_BASE + i for i in range(cfg.seeds)],
        secret=[secret],
        settings=settings,
    )


def job_spec(problem: Problem, cfg: RunConfig, plan: Plan, role: JobRole, **kw: object) -> JobSpec:
    """A job for a worker: the run's settings and the plan's device and timing, plus `kw` (seeds...).
    Every runner, the reference's too, runs on the same cores (`isolate.share_cores`: its CPU lane's
    `cpu_threads`; a GPU runner on any), set by its referee; a candidate's runner gets its walls."""
    walls = isolate.for_device(plan.device, cfg.confine) if role in ("candidate", "build") else None
    cores = [] if plan.device.startswith("cuda") else isolate.share_cores(cfg.cpu_threads, cfg.cpu_lane)
    return JobSpec(
        walls=None if walls is None else asdict(walls),
        cores=cores,
        budgets=cfg.budgets(role),
        role=role,
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


def worker_preloads(spec: JobSpec) -> list[str]:
    """What the worker of `spec` imports beyond every worker's modules, for the warm starter to preload for
    the workers like it that follow (sandbox/zygote.OPTIONAL_PRELOAD picks those it may): a candidate's or
    build's runner torch.utils.cpp_extension (its build hooks) and its backend's runner imports, a
    reference that times a torch.compile baseline torch._dynamo."""
    if spec.role in ("candidate", "build"):
        return [
            "torch.utils.cpp_extension",
            *(get_backend(spec.backend).runner_imports if spec.backend else ()),
        ]
    if spec.role == "reference" and spec.measure and any(get_mode(b).compile_mode for b in spec.baselines):
        return ["torch._dynamo"]
    return []
