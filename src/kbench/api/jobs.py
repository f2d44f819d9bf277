"""What crosses the Evaluator's boundary: a submission in, a ticket out, a verdict or our error at the end.

A `Submission` is one candidate for one problem plus where its verdict is filed in the run (sample, turn,
model). A `Ticket` follows it through the queue: queued -> building -> running -> done (or failed: our own
error, never a candidate's; or cancelled: closed before it ran). Its `future` is a
`concurrent.futures.Future[Verdict]`, so threads wait on it (`wait`, `as_completed`) and asyncio wraps it.
"""

from __future__ import annotations

import enum
import threading
import time
import uuid
from concurrent.futures import Future, InvalidStateError
from contextlib import suppress
from dataclasses import dataclass, field

from kbench.config import RunConfig
from kbench.errors import ConfigError, KbenchError
from kbench.store import VerdictKey
from kbench.types import Candidate, Problem, Verdict


class EvaluatorClosed(KbenchError):
    """The Evaluator was closed: it takes no submission, and a job it dropped has no verdict."""


class KeyConflict(ConfigError):
    """A submission names a verdict key (problem, sample, turn, backend, model) that holds another candidate."""


MAX_INDEX = 2**31 - 1  # the largest sample or turn number: the store keeps them as integers


@dataclass(frozen=True)
class Submission:
    """One candidate to judge. `problem` is an address (`2/1`, `kbench:2/1`, a name) or a Problem.

    `backend`: cuda | triton | cpp (default: the config's). `sample`: the verdict's sample number in the
    run (default: the next free one for this problem, backend and model). `turn`: its turn (multi-turn
    loops). `model`: who wrote it (default: the config's model, else "api"). `completion`: the model's
    whole answer, stored beside the verdict. `before_s`: the caller's own seconds before submitting,
    counted in the verdict as phase `cli` (kbench eval's start-up) together with the seconds from making
    this Submission to the start of its evaluation (the Evaluator's own set-up on first use), so that the
    verdict's phases cover the command's whole time; 0 (the default) counts neither. `priority`: among the
    jobs waiting for a builder or a device lane, higher ones go first (executors/local.py). `timeout_s`:
    the budget of each of the candidate's phases (its import, also in its build worker; correctness;
    timing), at most what the Evaluator's config gives them; its compiles keep `build_timeout_s`.
    """

    problem: str | Problem
    source: str
    backend: str | None = None
    sample: int | None = None
    turn: int = 0
    model: str | None = None
    completion: str = ""
    before_s: float = 0.0
    made_at: float = field(default_factory=time.monotonic, compare=False)
    priority: int = 0
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        for name, value in (("sample", self.sample), ("turn", self.turn)):
            if value is not None and not 0 <= value <= MAX_INDEX:
                raise ConfigError(f"{name} {value} is out of range: a verdict's {name} is 0 to {MAX_INDEX}")
        if not -MAX_PRIORITY <= self.priority <= MAX_PRIORITY:
            raise ConfigError(f"priority {self.priority} is out of range: -{MAX_PRIORITY} to {MAX_PRIORITY}")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ConfigError(f"timeout_s {self.timeout_s} must be a positive number of seconds")


MAX_PRIORITY = 1000


def shortened(cfg: RunConfig, timeout_s: float | None) -> RunConfig:
    """`cfg` with each of the candidate's phase budgets (load, correctness, timing) at most `timeout_s`."""
    if timeout_s is None:
        return cfg
    budgets = cfg.budgets("candidate")
    return cfg.model_copy(
        update={
            "load_timeout_s": min(budgets["load"], timeout_s),
            "correctness_timeout_s": min(budgets["correctness"], timeout_s),
            "timing_timeout_s": min(budgets["timing"], timeout_s),
        }
    )


@dataclass(frozen=True)
class EvaluatorStats:
    """What an Evaluator holds and has done (`Evaluator.stats()`)."""

    run_id: str | None
    queued: int  # submitted, not yet built (or waiting for a builder)
    building: int
    ready: int  # built, waiting for a device lane
    running: int
    finished: int  # verdicts delivered since the Evaluator opened
    failed: int  # jobs that ended in kbench's own error
    reference_runs: int  # reference workers started through the pool
    reference_reuses: int  # evaluations that reused a pooled reference run
    reference_bytes: int  # reference outputs held now

    @property
    def pending(self) -> int:
        return self.queued + self.building + self.ready + self.running


class JobState(str, enum.Enum):
    QUEUED = "queued"  # waiting for a builder
    BUILDING = "building"  # its extension compiles on a CPU builder (no GPU visible)
    READY = "ready"  # built, waiting for a device lane
    RUNNING = "running"  # its evaluation (reference, candidate worker, judge) runs on a lane
    DONE = "done"  # a verdict: read it with `verdict()`
    FAILED = "failed"  # kbench's own error (a broken problem, a misconfiguration): `error()` says which
    CANCELLED = "cancelled"  # the Evaluator closed before it ran


class TicketFuture(Future[Verdict]):
    """A job's Future, whose cancellation wakes `concurrent.futures.wait` and `as_completed` at once.

    A plain Future cancelled while queued tells those waiters only when whoever runs it calls
    `set_running_or_notify_cancel`: a job the Evaluator dropped on closing never reaches a lane, and one a
    client cancelled reaches it only when the jobs queued before it have run, so a caller waiting on the
    job's future would wait that long, or for ever."""

    def __init__(self) -> None:
        super().__init__()
        self._notify = threading.Lock()
        self._notified = False  # its cancellation was told to the waiters

    def set_running_or_notify_cancel(self) -> bool:
        with self._notify:
            if self._notified:
                return False
            running = super().set_running_or_notify_cancel()
            self._notified = not running
            return running

    def cancel(self) -> bool:
        if not super().cancel():
            return False
        self.set_running_or_notify_cancel()  # cancelled: the waiters hear it now
        return True


@dataclass(eq=False)
class Ticket:
    """One submitted job. `key` is where its verdict is (or will be) filed in the run."""

    key: VerdictKey
    problem: Problem
    candidate: Candidate
    submission: Submission
    device: str  # the device spec of its lanes: cpu, cuda (every GPU) or cuda:N
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    future: Future[Verdict] = field(default_factory=TicketFuture)
    phase: JobState = JobState.QUEUED
    stored: bool = False  # the verdict was already in the run's store (resubmitted key): not re-judged
    abandoned: bool = False  # the Evaluator was closed with cancel=True while this ran: no verdict
    submitted_at: float = field(default_factory=time.time)
    finished_at: float | None = None

    @property
    def state(self) -> JobState:
        if self.future.cancelled():
            return JobState.CANCELLED
        if self.future.done():
            return JobState.FAILED if self.future.exception() is not None else JobState.DONE
        return self.phase

    def done(self) -> bool:
        return self.future.done()

    def verdict(self, timeout: float | None = None) -> Verdict:
        """Wait for the verdict; raises the job's own error (`FAILED`), CancelledError, or TimeoutError."""
        return self.future.result(timeout)

    def error(self) -> BaseException | None:
        """The job's own error once it failed (None while it runs or when it has a verdict)."""
        if not self.future.done() or self.future.cancelled():
            return None
        return self.future.exception()

    def finish(self, verdict: Verdict) -> None:
        self.finished_at = time.time()
        with suppress(InvalidStateError):  # cancelled meanwhile (closing): the cancellation stands
            self.future.set_result(verdict)

    def fail(self, exc: BaseException) -> None:
        self.finished_at = time.time()
        with suppress(InvalidStateError):
            self.future.set_exception(exc)
