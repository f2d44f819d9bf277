"""`evaluate(problem, candidate, cfg) -> Verdict`: static checks, reference job, candidate job, verdict.

The host (this module) never imports candidate code: it reads the source as text, runs the static
checks, starts the trusted reference worker and the untrusted candidate worker (sandbox/), compares
outputs (on the GPU, in buffers it owns: evaluate/device_outputs.py; else CPU copies), and decides exactly
one status. `OneVerdict` reads as its steps: static checks, set-up, the reference job (beside it the build
and, on a GPU, the candidate's start), the build's outcome, the candidate job, the judge, the verdict. The
seeds and timing settings come from evaluate/plan.py, the reference's outputs and baseline timings from
evaluate/reference_run.py, the candidate's job from evaluate/candidate_run.py.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from kbench.backends import get_backend, tritonkey
from kbench.baselines.modes import compiles
from kbench.config import RunConfig, job_prefix, scratch_root
from kbench.errors import WorkerError
from kbench.evaluate.candidate_run import run_candidate
from kbench.evaluate.device_outputs import Receiver, premirror
from kbench.evaluate.floor import speed_of_light
from kbench.evaluate.judge import (
    WorkerOutcome,
    check_batching,
    check_outputs,
    check_timing,
)
from kbench.evaluate.phases import Account
from kbench.evaluate.plan import evaluation_device, make_plan
from kbench.evaluate.prebuild import prebuild
from kbench.evaluate.reference_cache import ReferenceData
from kbench.evaluate.reference_pool import ReferencePool
from kbench.evaluate.reference_run import get_reference
from kbench.evaluate.shared_reference import pooled_reference, reused_baselines
from kbench.evaluate.verdict import Evaluation, make_verdict
from kbench.problems.loader import check_preset
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

if TYPE_CHECKING:
    from kbench.analysis.roofline import SOL


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


class OneVerdict:
    """One candidate's evaluation, in the steps docs/architecture.md tells: static checks, set-up, the
    reference job (beside it the build and, on a GPU, the candidate's start), the build's outcome, the
    candidate job, the judge, and the verdict. What the steps share is `self.ev` (verdict.Evaluation)."""

    def __init__(
        self,
        problem: Problem,
        candidate: Candidate,
        cfg: RunConfig,
        baselines: Mapping[str, TimingStats] | None,
        references: ReferencePool | None,
        built: BuildResult | None,
        before_s: float,
    ) -> None:
        plan = make_plan(cfg, evaluation_device(cfg.device, candidate.backend))
        self.ev = Evaluation(problem, candidate, cfg, plan, Account(before_s), built=built)
        self.baselines, self.references = baselines, references
        self.receiver: Receiver | None = None  # the candidate's correctness outputs, on a GPU
        self.ref_receiver: Receiver | None = (
            None  # the reference's, when its run serves this evaluation alone
        )
        self.workdir = Path()
        self.floor: Future[SOL | None] | None = None
        self.building: Future[BuildResult | None] | None = None
        self.early: Future[WorkerOutcome] | None = None  # the candidate's job, started beside the reference
        self.cancel = threading.Event()

    def run(self) -> Verdict:
        ev = self.ev
        rejected = self.static_checks()
        if rejected is not None:
            return make_verdict(ev, rejected, None)
        self.set_up()
        with self.workspace():
            self.start()
            ref = self.reference()
            if isinstance(ref, WorkerOutcome):  # the candidate, beside it, rewrote the reference's files
                return make_verdict(ev, ref, None)
            with ev.acct.part("build"):
                ev.built = self.building.result() if self.building is not None else ev.built
            judged = self.build_failed() if ev.built is not None and not ev.built.ok else self.candidate(ref)
        self.check_disk(judged)
        return make_verdict(ev, judged, ref)

    def static_checks(self) -> WorkerOutcome | None:
        ev = self.ev
        with ev.acct.part("checks"):
            check_preset([ev.problem], ev.cfg.preset)  # ProblemError for a mistyped preset, before jobs
            ev.checks = _static(ev.candidate, ev.cfg)
            return _static_outcome(ev.checks)

    def set_up(self) -> None:
        """The backend's tools, the cache folder, Triton's key and the disk: our misconfiguration raises."""
        cfg, device = self.ev.cfg, self.ev.plan.device
        get_backend(self.ev.candidate.backend).check_environment(device)
        cfg.cache_dir.mkdir(parents=True, exist_ok=True)
        if runs_triton(self.ev.candidate, cfg, device):
            tritonkey.ensure(cfg.cache_dir)  # the first time: Triton's key for later jobs, in a thread
        low = short_of_disk(cfg)
        if low is not None:  # builds, the reference's outputs and the job folder all need room
            raise WorkerError(f"not enough disk to evaluate: {low}; free space there and run again")
        if cfg.device_outputs and device.startswith("cuda"):
            self.receiver = Receiver(device)
            # The reference's outputs into device buffers of this evaluation's own, when its reference serves
            # it alone (a shared one outlives it: the pool keeps CPU copies, read from the reference's files).
            self.ref_receiver = Receiver(device) if self.references is None else None

    @contextlib.contextmanager
    def workspace(self) -> Iterator[None]:
        """The job folders' parent, the device buffers and the threads, all gone when the steps end."""
        with (
            tempfile.TemporaryDirectory(prefix=job_prefix(), dir=scratch_root(self.ev.cfg)) as tmp,
            self.ref_receiver or contextlib.nullcontext(),  # the reference's outputs: closed last
            self.receiver or contextlib.nullcontext(),  # closed after the pool waited for the early worker
            ThreadPoolExecutor(max_workers=4, thread_name_prefix="kbench-eval") as pool,
        ):
            self.workdir, self.pool = Path(tmp), pool
            yield

    def start(self) -> None:
        """What runs beside the reference: the speed-of-light floor (a meta-device trace, seconds on a first
        count), this process's CUDA start, the build, and on a GPU the candidate's job."""
        ev, pool = self.ev, self.pool
        self.floor = (
            pool.submit(speed_of_light, ev.problem, ev.cfg, ev.plan.device) if ev.cfg.measure else None
        )
        if self.receiver is not None:
            pool.submit(self.receiver.prepare)
        if ev.built is None and get_backend(ev.candidate.backend).prebuilds:
            self.building = pool.submit(prebuild, ev.candidate, ev.cfg, ev.plan.device)
        # The candidate's job starts beside the reference's when nothing is left to build and the plan is this
        # evaluation's own: its start (imports, CUDA context) overlaps the reference's GPU phase, and the
        # device lease still gives each its GPU phase alone. A CPU is the timed device itself, so there the
        # jobs run one after the other.
        alone = self.references is None and self.building is None and (ev.built is None or ev.built.ok)
        if ev.plan.device.startswith("cuda") and alone:
            # Settled only when it waits for its buffers: it then takes the lease after the reference's GPU
            # phase, so it never holds the lease while the reference, which settles it, still needs it.
            self.early = pool.submit(
                run_candidate, ev.problem, ev.candidate, ev.cfg, ev.plan, self.workdir, self.cancel,
                self.receiver, settle=self.receiver is not None,
            )  # fmt: skip
        ev.reused = reused_baselines(self.baselines, ev.cfg, ev.plan, ev.problem)

    def _offer(self, found: dict[int, list[Layout | None]]) -> None:
        """The early job's buffers, offered from the reference's signed layouts the moment its GPU work is
        done, so the candidate's correctness overlaps the reference's write of its outputs and the host's
        read of them (its timing waits for both: settled)."""
        assert self.receiver is not None
        t0 = time.perf_counter()
        checked = self.ev.plan.checked
        self.receiver.offer(self.workdir / "candidate", {s: found[s] for s in checked if s in found})
        self.ev.acct.nested["ref:offer"] = time.perf_counter() - t0

    def reference(self) -> ReferenceData | WorkerOutcome:
        """The reference job's outputs and timings (the pool's, when the run shares one); a `cheat` outcome
        when the candidate, the only job beside it, rewrote its files."""
        ev = self.ev
        on_layouts = self._offer if self.early is not None and self.receiver is not None else None
        with ev.acct.part("ref"):
            try:
                if self.references is None:
                    ref = get_reference(
                        ev.problem, ev.cfg, ev.plan, self.workdir, skip=ev.reused.keys(),
                        on_layouts=on_layouts, receiver=self.ref_receiver,
                    )  # fmt: skip
                else:
                    ev.plan, ref = pooled_reference(
                        ev.problem, ev.cfg, ev.plan, ev.reused, self.references, self.workdir
                    )
            except BaseException as exc:
                self.cancel.set()  # no verdict without a reference: the early candidate's job ends now
                if isinstance(exc, ForgedResult) and self.early is not None:
                    return WorkerOutcome(
                        Status.CHEAT, f"the reference's files changed: {exc}", "evaluator-files"
                    )
                if isinstance(exc, ForgedResult):
                    raise WorkerError(f"the reference's files changed after it wrote them: {exc}") from None
                raise
            if self.receiver is not None:
                # The reference's outputs onto the device of the candidate's buffers, for the judge: here,
                # beside the early candidate's correctness, never during its timing (not yet settled).
                t0 = time.perf_counter()
                premirror(ref, ev.plan.checked, self.receiver.device)
                ev.acct.nested["ref:mirror"] = time.perf_counter() - t0
        if self.early is not None:
            mark_settled(
                self.workdir / "candidate"
            )  # the reference's outputs are written and read: it may time
        ev.acct.worker("ref", ref.phases)
        return ref

    def build_failed(self) -> WorkerOutcome:
        """A failed build is the verdict: the candidate never runs."""
        built = self.ev.built
        assert built is not None
        status = Status(built.status or Status.BUILD_ERROR.value)
        # a timeout names the phase that ran out: `load` (the candidate's own import) or `build` (a compile)
        judged = WorkerOutcome(
            status, built.message, (built.rule or "build") if status is Status.TIMEOUT else built.rule
        )
        judged.log_tail = built.log[-4000:]
        return judged

    def candidate(self, ref: ReferenceData) -> WorkerOutcome:
        """The candidate's job (started beside the reference, or now), judged; then, when asked, the same
        jobs again at sizes the candidate never saw."""
        ev = self.ev
        with ev.acct.part("cand"):
            if self.early is not None:
                outcome = self.early.result()
            else:
                outcome = run_candidate(
                    ev.problem, ev.candidate, ev.cfg, ev.plan, self.workdir, receiver=self.receiver, ref=ref
                )
        if outcome.result is not None:
            ev.acct.worker("cand", outcome.result.phases)
        with ev.acct.part("judge"):
            judged = self.judge(outcome, ref)
        if self.receiver is not None and self.receiver.why:
            judged.warnings.append(f"correctness outputs went through files: {self.receiver.why}")
        judged.log_tail = outcome.log_tail
        if ev.cfg.hidden_shapes:
            from kbench.evaluate.hidden import check_hidden

            with ev.acct.part("hidden"):
                judged = check_hidden(judged, ev.problem, ev.candidate, ev.cfg, ev.plan, self.workdir)
        return judged

    def judge(self, outcome: WorkerOutcome, ref: ReferenceData) -> WorkerOutcome:
        """Outputs against the reference's, then what the referee flagged, then the time against the
        speed-of-light floor."""
        ev = self.ev
        if outcome.status is not Status.OK:
            return outcome
        t0 = time.perf_counter()
        checked = check_outputs(
            outcome, self.workdir / "candidate", ref, ev.plan.checked, ev.plan.device,
            ev.problem.tol(ev.cfg.dtype), ev.plan.secret, self.receiver,
        )  # fmt: skip
        ev.acct.nested["judge:compare"] = time.perf_counter() - t0
        if checked.status is not Status.OK:
            return checked
        flags = checked.result.flagged if checked.result is not None else []
        if flags:  # what the referee saw, judged now that the correctness outputs are right
            rule, message = flags[0]
            return WorkerOutcome(Status.CHEAT, message, rule, checked.result, checked.correctness)
        if checked.result is not None and checked.result.timing is not None:
            t0 = time.perf_counter()
            try:
                sol = (
                    self.floor.result()
                    if self.floor is not None
                    else speed_of_light(ev.problem, ev.cfg, ev.plan.device)
                )
            except (
                Exception
            ) as exc:  # analysis failure: the verdict stands, the warning says the rule was off
                sol = None
                checked.warnings.append(f"speed-of-light floor unavailable ({type(exc).__name__}: {exc})")
            ev.acct.nested["judge:sol"] = time.perf_counter() - t0
            ev.sol_ms = sol.sol_ms if sol is not None else None
            checked = check_timing(checked, sol.floor_ms if sol is not None else None)
            if checked.status is Status.OK:
                eager = ref.timings.get("eager") or ev.reused.get("eager")
                checked = check_batching(checked, eager, ev.plan.device)
        return checked

    def check_disk(self, judged: WorkerOutcome) -> None:
        """Asked once the job folder is gone, so a candidate that filled it is not taken for a full disk: a
        failure on a disk that is full anyway may be a build or a write that found no room. Such a verdict
        is not given (nor recorded); the run stops and says so, and resuming it evaluates the candidate
        again."""
        low = short_of_disk(self.ev.cfg) if judged.status is not Status.OK else None
        if low is not None:
            raise WorkerError(
                f"{self.ev.problem.key}: the candidate's {judged.status.value} came with a full disk "
                f"({low}), "
                "so it may not be the candidate's doing; not recorded: free space there and resume the run"
            )


def evaluate(
    problem: Problem,
    candidate: Candidate,
    cfg: RunConfig,
    baselines: Mapping[str, TimingStats] | None = None,
    references: ReferencePool | None = None,
    built: BuildResult | None = None,
    before_s: float = 0.0,
) -> Verdict:
    """One verdict for one candidate (`OneVerdict`'s steps). Candidate failures are statuses; our
    misconfiguration raises. `baselines` (store.reuse.baselines_for) that match the device and timing
    settings are not re-timed; with `references`, evaluations of one problem in one run share a reference
    run (reference_pool). `built`: the candidate's prebuild (executors build ahead of the GPU queue);
    without one the build runs here, beside the reference run. A failed build is the verdict: the
    candidate never runs. `before_s`: the caller's own seconds before this call, counted in the verdict
    (`cli`, phases.py)."""
    return OneVerdict(problem, candidate, cfg, baselines, references, built, before_s).run()
