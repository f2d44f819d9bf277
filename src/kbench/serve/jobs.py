"""The service's jobs: the tickets it answers for by id, durable across restarts, idempotent on retry.

Every accepted job is written to the run's journal (store/journal.py) before its id is answered. A client
that retries a submission with the same idempotency key (the `Idempotency-Key` header) gets the job it
already has, never a second sample. The service started again on the same run (`kbench serve --run RUN`)
queues every job it had accepted and not ended under its old id (`requeue`), and answers for any id of
the run it knows: one no longer in memory is found in the journal and submitted again by its key, which
returns its stored verdict, or the job in flight. An id of another run is answered with where its
verdict is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager

from fastapi.exceptions import HTTPException

from kbench.api import Evaluator, EvaluatorClosed, KeyConflict, Submission, Ticket
from kbench.errors import KbenchError
from kbench.serve.server import ServiceLimits
from kbench.serve.wire import SubmitRequest
from kbench.store.journal import Journal, JournalEntry
from kbench.types import Verdict


class ServiceJobs:
    """Jobs by id: every pending one and the last `keep` finished ones in memory, all of them in `journal`
    (None: a service that records nothing, whose ids live as long as it does)."""

    def __init__(self, evaluator: Evaluator, keep: int, journal: Journal | None) -> None:
        self.evaluator, self.keep, self.journal = evaluator, keep, journal
        self._jobs: OrderedDict[str, Ticket] = OrderedDict()
        self._cancelled: set[str] = set()

    @property
    def run_id(self) -> str | None:
        return self.evaluator.run_id

    def requeue(self) -> int:
        """Queue again the run's jobs that a stopped or killed service had accepted and not ended."""
        if self.journal is None or self.run_id is None:
            return 0
        entries = self.journal.open_jobs(self.run_id)
        for entry in entries:
            self._remember(entry.id, self._resubmit(entry))
        return len(entries)

    def submit(self, body: SubmitRequest, idempotency_key: str | None) -> tuple[str, Ticket]:
        """A new job (its id and ticket), or the one this idempotency key already named."""
        if idempotency_key and self.journal is not None and self.run_id is not None:
            known = self.journal.by_idempotency_key(self.run_id, idempotency_key)
            if known is not None:
                if known.source != body.source or known.completion != body.completion:
                    raise HTTPException(409, f"idempotency key {idempotency_key!r} named another submission "
                                        f"(job {known.id}); use a new key for a new candidate")  # fmt: skip
                return known.id, self.get(known.id)
        submission = Submission(body.problem, body.source, body.backend, body.sample, body.turn, body.model,
                                body.completion, priority=body.priority, timeout_s=body.timeout_s)  # fmt: skip
        ticket = _submitted(self.evaluator, submission)
        if self.journal is not None and self.run_id is not None:
            self.journal.accept(self.run_id, ticket.id, ticket.key, submission.source, submission.completion,
                                idempotency_key or None, body.priority, body.timeout_s)  # fmt: skip
        self._remember(ticket.id, ticket)
        return ticket.id, ticket

    def get(self, ident: str) -> Ticket:
        ticket = self._jobs.get(ident)
        if ticket is not None:
            return ticket
        entry = self.journal.find(ident) if self.journal is not None else None
        if entry is None:
            where = f"; finished jobs' verdicts are in run {self.run_id}" if self.run_id else ""
            raise HTTPException(404, f"no job {ident!r} (unknown, or finished and forgotten{where})")
        if entry.run_id != self.run_id:
            raise HTTPException(
                404, f"job {ident} belongs to run {entry.run_id}, which this service does not continue: its "
                f"verdict, once it has one, is in that run (kbench report {entry.run_id}); start the service "
                f"with --run {entry.run_id} to answer for its jobs",
            )  # fmt: skip
        ticket = self._resubmit(entry)
        self._remember(ident, ticket)
        return ticket

    def cancel(self, ident: str) -> Ticket:
        ticket = self.get(ident)
        self._cancelled.add(ident)
        if not ticket.future.cancel():
            self._cancelled.discard(ident)
            raise HTTPException(409, f"job {ident} is {ticket.state.value}: only a job that has not started "
                                "running can be cancelled")  # fmt: skip
        return ticket

    def _resubmit(self, entry: JournalEntry) -> Ticket:
        key = entry.key
        submission = Submission(key.problem_key, entry.source, key.backend, key.sample, key.turn, key.model,
                                entry.completion, priority=entry.priority, timeout_s=entry.timeout_s)  # fmt: skip
        return _submitted(self.evaluator, submission)

    def _remember(self, ident: str, ticket: Ticket) -> None:
        self._jobs[ident] = ticket
        if self.journal is not None:
            ticket.future.add_done_callback(lambda future: self._ended(ident, future))
        excess, drop = len(self._jobs) - self.keep, list[str]()
        for old_id, old in self._jobs.items():  # oldest first; stops once enough finished ones are found
            if len(drop) >= excess:
                break
            if old.done():
                drop.append(old_id)
        for old_id in drop:
            del self._jobs[old_id]

    def _ended(self, ident: str, future: Future[Verdict]) -> None:
        """Mark the job ended in the journal: a verdict, its own error, a client's cancellation. A job the
        stopping service dropped (cancelled while queued, or closed while it ran) stays open."""
        assert self.journal is not None
        if future.cancelled():
            if ident not in self._cancelled:
                return
        elif isinstance(future.exception(), EvaluatorClosed):
            return
        self.journal.end(ident)


def _submitted(evaluator: Evaluator, submission: Submission) -> Ticket:
    with refusals():
        return evaluator.submit(submission)


@contextmanager
def refusals() -> Iterator[None]:
    """kbench's errors as the service's refusals: a key that holds another candidate 409, a closing
    service 503, any other of kbench's (an unknown problem, backend or preset; a backend this machine
    cannot run) 400."""
    try:
        yield
    except KeyConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except EvaluatorClosed as exc:
        raise HTTPException(503, str(exc)) from None
    except KbenchError as exc:
        raise HTTPException(400, str(exc)) from None


def check_room(evaluator: Evaluator, limits: ServiceLimits) -> None:
    """429 (retry after 5 s) while the queue holds `max_queue` pending jobs."""
    if evaluator.stats().pending >= limits.max_queue:
        raise HTTPException(
            429, f"the queue is full ({limits.max_queue} jobs); retry later", {"Retry-After": "5"}
        )
