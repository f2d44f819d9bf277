"""The functions an executor calls for an Evaluator's jobs: build ahead, evaluate on a lane, file, and
run a reference ahead on a lane with nothing built to evaluate.

The executor (executors/) owns the scheduling; these only run one job's stage and settle its ticket. A
candidate's failure is its verdict; kbench's own failure (a broken problem, a store that cannot be
written, a stop signal) becomes the job's error, so one bad job never stops the queue the others are in.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kbench.api.jobs import EvaluatorClosed, JobState, Ticket, shortened
from kbench.api.session import Session
from kbench.config import RunConfig
from kbench.evaluate.reference_pool import ReferencePool
from kbench.executors import Job
from kbench.types import BuildResult, Status, Verdict

_SKIPPED = Verdict(Status.CRASHED, "", "", "", "", "", message="no evaluation (the job had ended)")


class Runner:
    def __init__(
        self,
        config: RunConfig,
        session: Session,
        references: ReferencePool | None,
        build_ahead: bool,
        queued: Callable[[], int],
    ) -> None:
        self.config, self.session, self.references = config, session, references
        self.build_ahead, self.queued = build_ahead, queued
        self._cfgs: dict[tuple[str, str], RunConfig] = {}
        self.prefetched: set[tuple[str, str]] = set()  # (problem, device) whose reference a lane ran ahead

    def fail(self, ticket: Ticket, exc: BaseException) -> None:
        if ticket.abandoned:
            exc = EvaluatorClosed("the Evaluator was closed while this job ran; it has no verdict")
        ticket.fail(exc)

    def lost(self, job: Job, exc: BaseException) -> None:
        self.fail(job.tag, exc)

    def cfg_for(self, device: str, backend: str) -> RunConfig:
        cfg = self._cfgs.get((device, backend))
        if cfg is None:
            cfg = self._cfgs[(device, backend)] = self.config.model_copy(
                update={"device": device, "backend": backend}
            )
        return cfg

    def build(self, job: Job) -> BuildResult | None:
        """The executor's build function: on a CPU builder, no GPU visible (pipeline.PrebuildJob)."""
        ticket: Ticket = job.tag
        if ticket.done() or not self.build_ahead:
            return None
        ticket.phase = JobState.BUILDING
        try:
            from kbench.pipeline import PrebuildJob

            built = PrebuildJob(shortened(self.config, ticket.submission.timeout_s), self.queued() + 1)(job)
        except BaseException as exc:  # our own failure (a candidate's is a BuildResult): the job fails
            self.fail(ticket, exc)
            return None
        ticket.phase = JobState.READY
        return built

    def evaluate(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        """The executor's evaluation function, on one device lane."""
        ticket: Ticket = job.tag
        if ticket.done() or not ticket.future.set_running_or_notify_cancel():
            return _SKIPPED
        ticket.phase = JobState.RUNNING
        try:
            from kbench.evaluate.flow import evaluate

            sub = ticket.submission
            cfg = shortened(self.cfg_for(device, job.candidate.backend), sub.timeout_s)
            baselines = self.session.baselines(job.problem)
            before = sub.before_s + (time.monotonic() - sub.made_at) if sub.before_s > 0 else 0.0
            return evaluate(job.problem, job.candidate, cfg, baselines, self.references, built, before)
        except BaseException as exc:  # our failure, or a stop signal's Interrupted: this job's error
            self.fail(ticket, exc)
            return _SKIPPED

    def prefetch(self, job: Job, device: str) -> None:
        """The executor's prefetch (executors/local.py): while the job builds, a GPU lane with nothing
        built to evaluate runs its problem's reference into the pool, where the job's evaluation finds it.
        Once per problem and device in this Evaluator's life: a reference the pool evicted since is run by
        the evaluation that needs it, as without a prefetch. Nothing without a shared pool (each
        evaluation then runs its own reference) or for a job that has already ended."""
        ticket: Ticket = job.tag
        if self.references is None or ticket.done():
            return
        from kbench.evaluate.shared_reference import prefetch_reference

        cfg = self.cfg_for(device, job.candidate.backend)
        baselines = self.session.baselines(job.problem)
        prefetch_reference(job.problem, cfg, self.references, baselines, self.prefetched)

    def result(self, job: Job, verdict: Verdict) -> None:
        """The executor's result callback: file the verdict, then hand it to the waiting caller."""
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
