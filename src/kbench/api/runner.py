"""The functions an executor calls for an Evaluator's jobs: build ahead, evaluate on a lane, file, and
run a reference ahead on a lane with nothing built to evaluate.

Two halves. `Stages` does a job's work (its build, its evaluation, a reference run ahead) from the job
and its `Order` alone: it holds no ticket and no store, so an executor that runs the work in other
processes (Ray) ships it there. `Runner` is the host's half: it settles tickets (a job that ended
before its turn is skipped, a cancelled one never starts), files verdicts, and hands the work to
`Stages`, on the host's own threads for the local executor (`local_fns`) or as portable jobs for one
that runs elsewhere (`run_elsewhere`). The executor (executors/) owns the scheduling. A candidate's
failure is its verdict; kbench's own failure (a broken problem, a store that cannot be written, a stop
signal) becomes the job's error, so one bad job never stops the queue the others are in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from kbench.api.jobs import EvaluatorClosed, JobState, Ticket, shortened
from kbench.api.session import Session
from kbench.config import RunConfig
from kbench.evaluate.reference_pool import ReferencePool
from kbench.events import Activity
from kbench.executors import BuildFn, EvalFn, Executor, Job, PrefetchFn, ResultFn, lane_device
from kbench.types import BuildResult, Status, TimingStats, Verdict

_SKIPPED = Verdict(Status.CRASHED, "", "", "", "", "", message="no evaluation (the job had ended)")


@dataclass(frozen=True)
class Order:
    """What a job's work needs besides its problem and candidate, fixed by the host when it hands the job
    over: picklable, the tag of a portable job. `batch`: builds queued with it (a large batch makes a
    precompiled header first, evaluate/prebuild.py); `before_s`: seconds counted as the verdict's `cli`
    phase; `ref`: the host's id for the job (its ticket's), to find it again when its verdict comes back."""

    timeout_s: float | None = None
    baselines: Mapping[str, TimingStats] = field(default_factory=dict)
    batch: int = 1
    before_s: float = 0.0
    ref: str = ""


@dataclass
class Stages:
    """A job's build, evaluation and reference run ahead, from its `Order`. Picklable: the reference pool
    and the activity counts travel empty (Ray workers share neither with the host)."""

    config: RunConfig
    references: ReferencePool | None = None
    build_ahead: bool = True
    activity: Activity = field(default_factory=Activity)
    prefetched: set[tuple[str, str]] = field(default_factory=set)  # (problem, device) a lane ran ahead

    def _cfg(self, backend: str, order: Order, lane: str | None = None) -> RunConfig:
        """The job's config, on `lane`'s device (and a CPU lane's cores: executors.base.lane_device)."""
        update: dict[str, object] = {"backend": backend}
        if lane is not None:
            update["device"], update["cpu_lane"] = lane_device(lane)
        return shortened(self.config.model_copy(update=update), order.timeout_s)

    def build(self, job: Job) -> BuildResult | None:
        """On a CPU builder, no GPU visible: compile into the shared cache (None: built in the evaluation)."""
        if not self.build_ahead:
            return None
        from kbench.evaluate.plan import evaluation_device
        from kbench.evaluate.prebuild import prebuild

        order: Order = job.tag
        cfg = self._cfg(job.candidate.backend, order)
        with self.activity.track("builds"):
            return prebuild(job.candidate, cfg, evaluation_device(cfg.device, cfg.backend), order.batch)

    def evaluate(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        """On one device lane. A problem's reference comes from the pool unless the pool says this is the
        last of the problem's expected jobs and holds nothing of it (ReferencePool.begin): that one runs
        its own, which on a GPU keeps the outputs on the device instead of in files nobody reads again."""
        from kbench.evaluate.flow import evaluate

        order: Order = job.tag
        key, pool = job.problem.key, self.references
        shared = pool is not None and (pool.begin(key) or (key, device) in self.prefetched)
        try:
            with self.activity.track("evaluations"):
                cfg = self._cfg(job.candidate.backend, order, device)
                refs = pool if shared else None
                return evaluate(job.problem, job.candidate, cfg, order.baselines, refs, built, order.before_s)
        finally:
            if pool is not None:
                pool.end(key)

    def prefetch(self, job: Job, device: str) -> dict[str, float] | None:
        """While the job builds, a lane with nothing built to evaluate runs its problem's reference into the
        pool under the key its evaluation asks for; marked in `prefetched` first, so that evaluation waits
        for this run instead of starting its own. The run's phases (shared_reference.prefetch_reference)."""
        if self.references is None:
            return None
        from kbench.evaluate.shared_reference import prefetch_reference

        order: Order = job.tag
        cfg = self._cfg(job.candidate.backend, order, device)
        return prefetch_reference(job.problem, cfg, self.references, order.baselines, self.prefetched)


def closed_batch(cfg: RunConfig, jobs: Sequence[Job]) -> tuple[Stages, list[Job]]:
    """The stages and portable jobs of one closed batch run straight through an executor, without tickets
    or a store (the executor benchmarks measure the engine's stages so): each job's tag becomes an Order
    whose `ref` is str(tag), and the pool expects the batch's problems (ReferencePool.expect)."""
    from kbench.evaluate.reference_pool import ReferencePool

    stages = Stages(cfg, ReferencePool())
    assert stages.references is not None
    stages.references.expect(job.problem.key for job in jobs)
    n = len(jobs)
    return stages, [Job(j.problem, j.candidate, Order(batch=n, ref=str(j.tag)), j.priority) for j in jobs]


class Runner:
    def __init__(self, stages: Stages, session: Session, queued: Callable[[], int]) -> None:
        self.stages, self.session, self.queued = stages, session, queued

    def fail(self, ticket: Ticket, exc: BaseException) -> None:
        if ticket.abandoned:
            exc = EvaluatorClosed("the Evaluator was closed while this job ran; it has no verdict")
        ticket.fail(exc)

    def lost(self, job: Job, exc: BaseException) -> None:
        self.fail(job.tag, exc)

    def order(self, ticket: Ticket, batch: int = 1) -> Order:
        sub = ticket.submission
        before = sub.before_s + (time.monotonic() - sub.made_at) if sub.before_s > 0 else 0.0
        baselines = self.session.baselines(ticket.problem)
        return Order(sub.timeout_s, baselines, batch, before, ticket.id)

    def _portable(self, job: Job, order: Order) -> Job:
        return Job(job.problem, job.candidate, tag=order, priority=job.priority)

    def local_fns(self) -> tuple[BuildFn, EvalFn, ResultFn, PrefetchFn]:
        """What an executor running on the host's threads (the local one) is given."""
        return self.build, self.evaluate, self.result, self.prefetch

    def build(self, job: Job) -> BuildResult | None:
        ticket: Ticket = job.tag
        if ticket.done() or not self.stages.build_ahead:
            return None
        ticket.phase = JobState.BUILDING
        try:
            built = self.stages.build(self._portable(job, self.order(ticket, self.queued() + 1)))
        except BaseException as exc:  # our own failure (a candidate's is a BuildResult): the job fails
            self.fail(ticket, exc)
            return None
        ticket.phase = JobState.READY
        return built

    def evaluate(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        ticket: Ticket = job.tag
        if ticket.done() or not ticket.future.set_running_or_notify_cancel():
            return _SKIPPED
        ticket.phase = JobState.RUNNING
        try:
            return self.stages.evaluate(self._portable(job, self.order(ticket)), device, built)
        except BaseException as exc:  # our failure, or a stop signal's Interrupted: this job's error
            self.fail(ticket, exc)
            return _SKIPPED

    def prefetch(self, job: Job, device: str) -> None:
        """Nothing for a job that has already ended; see Stages.prefetch."""
        ticket: Ticket = job.tag
        if not ticket.done():
            self.stages.prefetch(self._portable(job, self.order(ticket)), device)

    def result(self, job: Job, verdict: Verdict) -> None:
        """File the verdict, then hand it to the waiting caller."""
        ticket: Ticket = job.tag
        if verdict is _SKIPPED or ticket.done():
            return
        if ticket.abandoned:
            self.fail(ticket, EvaluatorClosed(""))
            return
        try:
            completion = ticket.submission.completion
            self.session.record(ticket.key, job.problem, verdict, job.candidate.source, completion)
        except Exception as exc:  # the store failed: the caller must not believe the verdict is filed
            self.fail(ticket, exc)
            return
        ticket.finish(verdict)

    def run_elsewhere(
        self, executor: Executor, jobs: Iterable[Job], batch: Callable[[], int] | None = None
    ) -> None:
        """Hand jobs to an executor that runs the work in other processes (Ray): each job that has not
        ended goes as a portable copy (its ticket stays here, marked running: from now on it cannot be
        cancelled, only abandoned), and each verdict that comes back settles its ticket here. `jobs`: a
        batch (a list), or a feed that stays open, read as the executor takes it (`batch`: the builds
        queued with a job taken then, for its Order; a list's length otherwise)."""
        tickets: dict[str, Ticket] = {}
        listed = jobs if isinstance(jobs, list) else None

        def portable() -> Iterator[Job]:
            for job in jobs:
                ticket: Ticket = job.tag
                if ticket.done() or not ticket.future.set_running_or_notify_cancel():
                    continue
                ticket.phase = JobState.BUILDING if self.stages.build_ahead else JobState.RUNNING
                tickets[ticket.id] = ticket
                size = len(listed) if listed is not None else (batch() + 1 if batch is not None else 1)
                yield self._portable(job, self.order(ticket, size))

        def settle(job: Job, verdict: Verdict) -> None:
            ticket = tickets[job.tag.ref]
            self.result(Job(job.problem, job.candidate, tag=ticket), verdict)

        # a batch's copies are made up front (every ticket running before the executor starts); a
        # feed's as the executor takes them
        taken: Iterable[Job] = list(portable()) if listed is not None else portable()
        executor.run(taken, self.stages.build, self.stages.evaluate, settle)
