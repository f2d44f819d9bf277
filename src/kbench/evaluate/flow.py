"""`evaluate(problem, candidate, cfg) -> Verdict`: static checks, reference job, candidate job, verdict.

The host (this module) never imports candidate code: it reads the source as text, runs the static
checks, starts the trusted reference worker and the untrusted candidate worker (sandbox/), compares
outputs (on the GPU, in buffers it owns: evaluate/device_outputs.py; else CPU copies), and decides exactly
one status. Seeds: `cfg.seeds` fixed ones, one per-run
secret seed (secrets.randbelow) for correctness, and three more secret seeds whose inputs are the
timing sets (the reference computes their outputs every run, so sampled outputs can be re-checked).
"""

from __future__ import annotations

import contextlib
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kbench.backends import get_backend
from kbench.baselines.modes import modes_for
from kbench.config import RunConfig, job_prefix, scratch_root
from kbench.errors import ProblemError, WorkerError
from kbench.evaluate.device_outputs import LayoutWatch, Receiver, layouts, premirror
from kbench.evaluate.judge import (
    WorkerOutcome,
    check_outputs,
    check_samples,
    check_timing,
    crash_message,
    read_worker,
)
from kbench.evaluate.phases import Account
from kbench.evaluate.prebuild import prebuild, reference_env, worker_env
from kbench.evaluate.reference_cache import ReferenceData, cache_key, read_cache, write_cache
from kbench.evaluate.reference_pool import ReferencePool, pool_key
from kbench.evaluate.verdict import make_verdict, sol_ms
from kbench.hardware import device_name
from kbench.problems.loader import preset_overrides
from kbench.sandbox.host import run_worker
from kbench.sandbox.offer import Layout, mark_settled
from kbench.sandbox.protocol import (
    KEY_BYTES,
    ForgedResult,
    JobSpec,
    WorkerResult,
    load_tensors,
    load_verified,
    read_result,
)
from kbench.store.reuse import reusable
from kbench.types import (
    BuildResult,
    Candidate,
    CheckReport,
    Problem,
    Status,
    TimingSettings,
    TimingStats,
    Verdict,
)

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
        )
    # CPU: 1 s per callable reaches the 0.5 % rse on small presets when nothing else runs; under load
    # the rse is reported instead of spending 5 s x 3 callables per verdict.
    budget = min(cfg.timing_budget_s, cfg.cpu_timing_budget_s)
    # the 0.2 s minimum is for GPU clocks' wander; CPU calls of the small presets are microseconds
    return TimingSettings(budget_s=budget, batch=cfg.timing_batch, threads=cfg.cpu_threads, min_time_s=0.05)


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


def get_reference(
    problem: Problem,
    cfg: RunConfig,
    plan: Plan,
    workdir: Path,
    skip: Collection[str] = (),
    on_layouts: Callable[[dict[int, list[Layout | None]]], None] | None = None,
) -> ReferenceData:
    """Reference outputs for every seed and baseline timings (modes in `skip` are reused, not timed), the
    fixed part from the disk cache, whose key holds the modes timed. `on_layouts` gets every seed's output
    layouts (dtype, shape) once, as soon as the worker has signed them: when its GPU work is done, before it
    writes the outputs and long before the host has read them (device_outputs.LayoutWatch)."""
    from kbench.hardware import torch_version

    on_gpu = plan.device.startswith("cuda")
    baselines = [b for b in modes_for(cfg.baselines, on_gpu) if b not in skip]
    fixed_spec = job_spec(
        problem,
        cfg,
        plan,
        role="reference",
        seeds=plan.fixed,
        timing_seeds=REFERENCE_TIMING_SEEDS,
        baselines=baselines,
        measure=cfg.measure,
    )
    folder = cfg.cache_dir / "reference" / cache_key(fixed_spec, torch_version(), device_name(plan.device))
    cached = read_cache(folder)
    run_seeds = plan.secret + plan.timing + ([] if cached else plan.fixed)
    spec = fixed_spec.model_copy(update={"seeds": run_seeds, "measure": cfg.measure and cached is None})
    jobdir = workdir / "reference"
    env = reference_env(cfg, plan.device)
    budgets = cfg.budgets("reference")
    key = secrets.token_bytes(KEY_BYTES)
    known = layouts(cached.outputs, plan.fixed) if cached else {}
    watch = LayoutWatch(jobdir, key, known, on_layouts) if on_layouts is not None else None
    try:
        exit_ = run_worker(
            "kbench.worker.reference", jobdir, spec, budgets, env=env, start=cfg.worker_start, key=key
        )
    finally:
        if watch is not None:
            watch.stop()  # layouts not delivered yet come from the signed result below
    t0 = time.perf_counter()
    result = read_result(jobdir, exit_.key, files=False) if not exit_.timed_out else None
    if result is not None and result.error:
        raise WorkerError(result.error)
    if result is None:
        if exit_.timed_out:
            why = f"ran past its {exit_.phase} budget of {exit_.budget_s:.0f} s"
        else:  # e.g. "worker exited with code 70 without writing a result"
            why = f"failed: {crash_message(exit_.returncode)}"
        tail = exit_.log_tail or "(the worker wrote nothing to its log)"
        raise ProblemError(f"{problem.key}: the reference {why} ({problem.path}):\n{tail}")
    if watch is not None:
        watch.settle(result.outputs)
    data = ReferenceData(
        cache_hit=cached is not None,
        phases={**result.phases, "wall": round(exit_.seconds, 3), "spawn": round(exit_.spawn_s, 3)},
    )
    _absorb(data, result, jobdir, load_verified)
    data.phases["read"] = round(time.perf_counter() - t0, 3)  # reading and verifying the signed files
    if cached is None:
        t0 = time.perf_counter()
        write_cache(folder, jobdir, result, plan.fixed)  # the copy runs on in the background
        data.phases["cache"] = round(time.perf_counter() - t0, 3)
    else:
        _absorb(data, cached, folder)
    data.timings = (cached or result).timings
    return data


def _absorb(
    data: ReferenceData, result: WorkerResult, folder: Path, load: Callable[..., list[Any]] = load_tensors
) -> None:
    for seed, files in result.outputs.items():
        data.outputs[int(seed)] = load(folder, files)
        data.checksums[int(seed)] = result.input_checksums[seed]


def _static(candidate: Candidate, cfg: RunConfig) -> CheckReport:
    if not cfg.static_checks:
        return CheckReport()
    from kbench.checks import run_checks

    return run_checks(candidate.source, candidate.backend, cfg.dtype)


def _static_outcome(checks: CheckReport) -> WorkerOutcome | None:
    """A rejecting finding ends the evaluation; a source that does not parse is a `load_error`."""
    from kbench.checks import SYNTAX_RULE

    first = next((f for f in checks.findings if f.severity.value == "reject"), None)
    if first is None:
        return None
    if first.rule == SYNTAX_RULE:
        return WorkerOutcome(Status.LOAD_ERROR, f"line {first.line}: {first.message}")
    return WorkerOutcome(Status.STATIC_REJECT, first.message, f"static:{first.rule}")


def run_candidate(
    problem: Problem,
    candidate: Candidate,
    cfg: RunConfig,
    plan: Plan,
    workdir: Path,
    cancel: threading.Event | None = None,
    receiver: Receiver | None = None,
    ref: ReferenceData | None = None,
    settle: bool = False,
) -> WorkerOutcome:
    """The candidate's worker, start to exit. With `receiver` its correctness outputs go into the host's
    device buffers, offered here when `ref` is known, else by the caller once it is (the worker waits).
    With `settle` (started beside the reference) it times only once the caller has settled it."""
    backend = get_backend(candidate.backend)
    jobdir = workdir / "candidate"
    jobdir.mkdir(parents=True, exist_ok=True)
    path = jobdir / "candidate.py"
    path.write_text(candidate.source)
    spec = job_spec(
        problem,
        cfg,
        plan,
        role="candidate",
        backend=candidate.backend,
        candidate_file=str(path),
        kernel_names=list(backend.kernel_names(candidate.source)),
        seeds=plan.fixed + plan.secret,
        timing_seeds=plan.timing,
        sample_count=SAMPLE_COUNT,
        sample_whole_bytes=cfg.sample_whole_mib << 20,
        measure=cfg.measure,
        receive=receiver is not None,
        settle=settle,
    )
    env = worker_env(candidate.backend, cfg, plan.device)
    budgets = cfg.budgets("candidate")
    start = cfg.worker_start
    key = None
    if receiver is not None:
        key = receiver.key
        if ref is not None:
            receiver.offer(jobdir, layouts(ref.outputs, spec.seeds))
    exit_ = run_worker(
        "kbench.worker.candidate", jobdir, spec, budgets, env=env, start=start, cancel=cancel, key=key
    )
    t0 = time.perf_counter()
    outcome = read_worker(exit_, jobdir)
    if outcome.result is not None:
        outcome.result.phases["wall"] = round(exit_.seconds, 3)
        outcome.result.phases["spawn"] = round(exit_.spawn_s, 3)
        outcome.result.phases["read"] = round(time.perf_counter() - t0, 3)
    if exit_.leftover and outcome.status is Status.OK:
        outcome = WorkerOutcome(
            Status.CHEAT, "the candidate left a process running (killed)", "child-process", outcome.result
        )
    outcome.log_tail = exit_.log_tail
    return outcome


def _judge(
    outcome: WorkerOutcome,
    problem: Problem,
    cfg: RunConfig,
    plan: Plan,
    ref: ReferenceData,
    workdir: Path,
    acct: Account,
    floor: Future[float | None] | None = None,
    receiver: Receiver | None = None,
) -> WorkerOutcome:
    jobdir = workdir / "candidate"
    tol = problem.tol(cfg.dtype)
    if outcome.status is not Status.OK and outcome.rule != "child-process":
        return outcome
    t0 = time.perf_counter()
    seeds = plan.fixed + plan.secret
    checked = check_outputs(outcome, jobdir, ref, seeds, plan.device, tol, plan.secret, receiver)
    acct.nested["judge:compare"] = time.perf_counter() - t0
    if checked.status is not Status.OK or outcome.status is not Status.OK:
        return (
            checked
            if checked.status is not Status.OK
            else WorkerOutcome(
                outcome.status, outcome.message, outcome.rule, outcome.result, checked.correctness
            )
        )
    if checked.result is not None and checked.result.inconsistent:
        rule = "timing-output-inconsistent"
        return WorkerOutcome(
            Status.CHEAT, checked.result.inconsistent, rule, checked.result, checked.correctness
        )
    t0 = time.perf_counter()
    checked = check_samples(checked, jobdir, ref, plan.timing, tol)
    acct.nested["judge:samples"] = time.perf_counter() - t0
    if checked.status is Status.OK and checked.result is not None and checked.result.timing is not None:
        t0 = time.perf_counter()
        try:
            sol = floor.result() if floor is not None else sol_ms(problem, cfg, plan.device)
        except Exception as exc:  # analysis failure: the verdict stands, the warning says the rule was off
            sol = None
            checked.warnings.append(f"speed-of-light floor unavailable ({type(exc).__name__}: {exc})")
        acct.nested["judge:sol"] = time.perf_counter() - t0
        checked = check_timing(checked, sol)
    return checked


def evaluate(
    problem: Problem,
    candidate: Candidate,
    cfg: RunConfig,
    baselines: Mapping[str, TimingStats] | None = None,
    references: ReferencePool | None = None,
    built: BuildResult | None = None,
    before_s: float = 0.0,
) -> Verdict:
    """One verdict for one candidate. Candidate failures are statuses; our misconfiguration raises.
    `baselines` (store.reuse.baselines_for) that match the device and timing settings are not re-timed;
    with `references`, evaluations of one problem in one run share a reference run (reference_pool).
    `built`: the candidate's prebuild (executors build ahead of the GPU queue); without one the build
    runs here, beside the reference run. A failed build is the verdict: the candidate never runs.
    `before_s`: the caller's own seconds before this call, counted in the verdict (`cli`, phases.py)."""
    acct = Account(before_s)
    with acct.part("checks"):
        device = evaluation_device(cfg.device, candidate.backend)
        plan = make_plan(cfg, device)
        preset_overrides(problem, cfg.preset)  # ProblemError for an unknown preset, before any worker
        checks = _static(candidate, cfg)
        rejected = _static_outcome(checks)
    if rejected is not None:
        return make_verdict(problem, candidate, cfg, plan, rejected, checks, None, acct)
    backend = get_backend(candidate.backend)
    backend.check_environment(device)
    cfg.cache_dir.mkdir(parents=True, exist_ok=True)
    receiver = Receiver(device) if cfg.device_outputs and device.startswith("cuda") else None
    with (
        tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(cfg)) as tmp,
        receiver or contextlib.nullcontext(),  # closed after the pool below waited for the early worker
        ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbench-eval") as pool,
    ):
        workdir = Path(tmp)
        # The speed-of-light floor (a meta-device trace of the model, seconds on a first count; the counts are
        # kept on disk) is worked out while the workers run, not after them; so is this process's CUDA start.
        floor = pool.submit(sol_ms, problem, cfg, device) if cfg.measure else None
        if receiver is not None:
            pool.submit(receiver.prepare)
        building = (
            pool.submit(prebuild, candidate, cfg, device) if built is None and backend.prebuilds else None
        )
        # On a GPU the candidate's worker starts beside the reference's when nothing is left to build and
        # the plan is this evaluation's own: its start (imports, CUDA context) overlaps the reference's
        # GPU phase, and the device lease still gives each its GPU phase alone. A CPU is the timed device
        # itself, so there the workers run one after the other.
        early, cancel = None, threading.Event()
        if device.startswith("cuda") and references is None and building is None and (not built or built.ok):
            # Settled only when it waits for its buffers: it then takes the lease after the reference's GPU
            # phase, so it never holds the lease while the reference, which settles it, still needs it.
            settled = receiver is not None
            early = pool.submit(
                run_candidate, problem, candidate, cfg, plan, workdir, cancel, receiver, settle=settled
            )
        reused = (
            reusable(baselines or {}, cfg.baselines, asdict(plan.settings), device) if cfg.measure else {}
        )

        def offer(found: dict[int, list[Layout | None]]) -> None:
            # The early worker waits for its buffers: offered from the reference's signed layouts the
            # moment its GPU work is done, so the candidate's correctness overlaps the reference's write
            # of its outputs and the host's read of them (its timing waits for both: settled).
            assert receiver is not None
            t0 = time.perf_counter()
            wanted = plan.fixed + plan.secret
            receiver.offer(workdir / "candidate", {s: found[s] for s in wanted if s in found})
            acct.nested["ref:offer"] = time.perf_counter() - t0

        # Only an early worker with buffers to wait for needs the layouts: else nothing looks for them.
        on_layouts = offer if early is not None and receiver is not None else None

        with acct.part("ref"):
            try:
                if references is None:
                    ref = get_reference(
                        problem, cfg, plan, workdir, skip=reused.keys(), on_layouts=on_layouts
                    )
                else:
                    key = pool_key(problem, cfg, device, reused.keys())
                    plan, ref, _ = references.get(
                        key, lambda: (plan, get_reference(problem, cfg, plan, workdir, skip=reused.keys()))
                    )
            except BaseException as exc:
                cancel.set()  # no verdict without a reference: the early candidate's worker ends now
                if isinstance(exc, ForgedResult) and early is not None:
                    # Only the candidate ran beside the reference: it rewrote the reference's files.
                    tampered = WorkerOutcome(
                        Status.CHEAT, f"the reference's files changed: {exc}", "evaluator-files"
                    )
                    return make_verdict(problem, candidate, cfg, plan, tampered, checks, None, acct)
                if isinstance(exc, ForgedResult):
                    raise WorkerError(f"the reference's files changed after it wrote them: {exc}") from None
                raise
            if receiver is not None:
                # The reference's outputs onto the device of the candidate's buffers, for the judge: here,
                # beside the early candidate's correctness, and never during its timing (not yet settled).
                t0 = time.perf_counter()
                premirror(ref, plan.fixed + plan.secret, receiver.device)
                acct.nested["ref:mirror"] = time.perf_counter() - t0
        if early is not None:
            mark_settled(workdir / "candidate")  # the reference's outputs are written and read: it may time
        acct.worker("ref", ref.phases)
        with acct.part("build"):
            built = building.result() if building is not None else built
        if built is not None and not built.ok:
            status = Status(built.status or Status.BUILD_ERROR.value)
            judged = WorkerOutcome(status, built.message, "build" if status is Status.TIMEOUT else built.rule)
            judged.log_tail = built.log[-4000:]
        else:
            with acct.part("cand"):
                outcome = (
                    early.result()
                    if early
                    else run_candidate(problem, candidate, cfg, plan, workdir, receiver=receiver, ref=ref)
                )
            if outcome.result is not None:
                acct.worker("cand", outcome.result.phases)
            with acct.part("judge"):
                judged = _judge(outcome, problem, cfg, plan, ref, workdir, acct, floor, receiver)
            if receiver is not None and receiver.why:
                judged.warnings.append(f"correctness outputs went through files: {receiver.why}")
            judged.log_tail = outcome.log_tail
            if cfg.hidden_shapes:  # the same jobs again, at sizes the candidate never saw
                from kbench.generalize import check_hidden

                with acct.part("hidden"):
                    judged = check_hidden(judged, problem, candidate, cfg, plan, workdir)
    return make_verdict(problem, candidate, cfg, plan, judged, checks, ref, acct, reused, built)
