"""`evaluate(problem, candidate, cfg) -> Verdict`: static checks, reference job, candidate job, verdict.

The host (this module) never imports candidate code: it reads the source as text, runs the static
checks, starts the trusted reference worker and the untrusted candidate worker (sandbox/), compares
outputs (on the GPU, in buffers it owns: evaluate/device_outputs.py; else CPU copies), and decides exactly
one status. The seeds and timing settings come from evaluate/plan.py, the reference's outputs and baseline
timings from evaluate/reference_run.py.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from kbench.backends import get_backend, tritonkey
from kbench.baselines.modes import compiles
from kbench.checks import kernel_names
from kbench.config import RunConfig, job_prefix, scratch_root
from kbench.errors import WorkerError
from kbench.evaluate.device_outputs import Receiver, layouts, premirror
from kbench.evaluate.floor import sol_ms
from kbench.evaluate.judge import (
    WorkerOutcome,
    check_outputs,
    check_timing,
    read_worker,
)
from kbench.evaluate.phases import Account
from kbench.evaluate.plan import Plan, evaluation_device, job_spec, make_plan
from kbench.evaluate.prebuild import candidate_env, prebuild
from kbench.evaluate.reference_cache import ReferenceData
from kbench.evaluate.reference_pool import ReferencePool
from kbench.evaluate.reference_run import get_reference
from kbench.evaluate.shared_reference import pooled_reference, reused_baselines
from kbench.evaluate.verdict import make_verdict
from kbench.problems.loader import preset_overrides
from kbench.sandbox.host import REFEREE, run_worker
from kbench.sandbox.offer import Layout, mark_settled
from kbench.sandbox.protocol import ForgedResult
from kbench.types import (
    BuildResult,
    Candidate,
    CheckReport,
    Problem,
    Status,
    TimingStats,
    Verdict,
)


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
        kernel_names=list(kernel_names(candidate.source, candidate.backend)),
        seeds=plan.checked,
        measure=cfg.measure,
        receive=receiver is not None,
        settle=settle,
        min_kernel_share=cfg.min_kernel_share,
    )
    env = candidate_env(candidate.backend, cfg, plan.device)
    budgets = cfg.budgets("candidate")
    start = cfg.worker_start
    key = None
    if receiver is not None:
        key = receiver.key
        if ref is not None:
            receiver.offer(jobdir, layouts(ref.outputs, spec.seeds))
    exit_ = run_worker(REFEREE, jobdir, spec, budgets, env=env, start=start, cancel=cancel, key=key)
    t0 = time.perf_counter()
    outcome = read_worker(exit_, jobdir)
    if outcome.result is not None:
        outcome.result.phases["wall"] = round(exit_.seconds, 3)
        outcome.result.phases["spawn"] = round(exit_.spawn_s, 3)
        outcome.result.phases.update(exit_.start_phases)
        outcome.result.phases["read"] = round(time.perf_counter() - t0, 3)
    if exit_.leftover and outcome.result is not None:  # escaped its referee's sweep: the host found it
        outcome.result.flagged.append(("child-process", "the candidate left a process running (killed)"))
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
    if outcome.status is not Status.OK:
        return outcome
    t0 = time.perf_counter()
    checked = check_outputs(outcome, jobdir, ref, plan.checked, plan.device, tol, plan.secret, receiver)
    acct.nested["judge:compare"] = time.perf_counter() - t0
    if checked.status is not Status.OK:
        return checked
    flags = checked.result.flagged if checked.result is not None else []
    if flags:  # what the referee saw, judged now that the correctness outputs are right
        rule, message = flags[0]
        return WorkerOutcome(Status.CHEAT, message, rule, checked.result, checked.correctness)
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


def runs_triton(candidate: Candidate, cfg: RunConfig, device: str) -> bool:
    """Whether a worker of this evaluation launches Triton kernels on a GPU (a Triton candidate, or a
    torch.compile baseline timed there: Inductor's kernels are Triton's), and so looks Triton's key up."""
    if not device.startswith("cuda"):
        return False
    return get_backend(candidate.backend).triton_kernels or (cfg.measure and compiles(cfg.baselines))


def short_of_disk(cfg: RunConfig) -> str | None:
    """A line naming the cache folder or the job folders' file system when it has less than
    `min_free_disk_gb` free (below which a failed build or write may be the disk's fault)."""
    for path in dict.fromkeys((cfg.cache_dir, scratch_root(cfg))):
        try:
            free = shutil.disk_usage(path).free
        except OSError:  # not made yet: the evaluation says why when it makes it
            continue
        if free < cfg.min_free_disk_gb * 1e9:
            return f"{path} has {free / 2**20:.0f} MiB free (min_free_disk_gb: {cfg.min_free_disk_gb:g})"
    return None


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
    if runs_triton(candidate, cfg, device):
        tritonkey.ensure(cfg.cache_dir)  # the first time: Triton's key for later workers, in a thread here
    low = short_of_disk(cfg)
    if low is not None:  # builds, the reference's outputs and the job folder all need room
        raise WorkerError(f"not enough disk to evaluate: {low}; free space there and run again")
    receiver = Receiver(device) if cfg.device_outputs and device.startswith("cuda") else None
    # The reference's outputs into device buffers of this evaluation's own, when its reference serves it
    # alone (a shared one outlives it: the pool keeps CPU copies, read from the reference's files).
    ref_receiver = Receiver(device) if receiver is not None and references is None else None
    with (
        tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(cfg)) as tmp,
        ref_receiver or contextlib.nullcontext(),  # the reference's outputs: closed last
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
        reused = reused_baselines(baselines, cfg, plan)

        def offer(found: dict[int, list[Layout | None]]) -> None:
            # The early worker waits for its buffers: offered from the reference's signed layouts the
            # moment its GPU work is done, so the candidate's correctness overlaps the reference's write
            # of its outputs and the host's read of them (its timing waits for both: settled).
            assert receiver is not None
            t0 = time.perf_counter()
            receiver.offer(workdir / "candidate", {s: found[s] for s in plan.checked if s in found})
            acct.nested["ref:offer"] = time.perf_counter() - t0

        # Only an early worker with buffers to wait for needs the layouts: else nothing looks for them.
        on_layouts = offer if early is not None and receiver is not None else None

        with acct.part("ref"):
            try:
                if references is None:
                    ref = get_reference(
                        problem,
                        cfg,
                        plan,
                        workdir,
                        skip=reused.keys(),
                        on_layouts=on_layouts,
                        receiver=ref_receiver,
                    )
                else:
                    plan, ref = pooled_reference(problem, cfg, plan, reused, references, workdir)
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
                # The reference's outputs onto the device of the candidate's buffers, for the judge (those
                # it delivered there already are): here, beside the early candidate's correctness, and never
                # during its timing (not yet settled).
                t0 = time.perf_counter()
                premirror(ref, plan.checked, receiver.device)
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
                from kbench.evaluate.hidden import check_hidden

                with acct.part("hidden"):
                    judged = check_hidden(judged, problem, candidate, cfg, plan, workdir)
    # Asked once the job folder is gone, so a candidate that filled it is not taken for a full disk: a
    # failure on a disk that is full anyway may be a build or a write that found no room. Such a verdict
    # is not given (nor recorded); the run stops and says so, and resuming it evaluates the candidate again.
    low = short_of_disk(cfg) if judged.status is not Status.OK else None
    if low is not None:
        raise WorkerError(
            f"{problem.key}: the candidate's {judged.status.value} came with a full disk ({low}), so it may "
            "not be the candidate's doing; not recorded: free space there and resume the run"
        )
    return make_verdict(problem, candidate, cfg, plan, judged, checks, ref, acct, reused, built)
