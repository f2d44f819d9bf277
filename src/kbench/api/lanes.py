"""The Evaluator's queue: submissions flow into the executors `kbench run` uses, for as long as it is open.

One pump per device spec (`cpu`, `cuda` = every GPU, `cuda:N`): a thread that hands the executor a
`Feed` of jobs. The local executor consumes a feed as it comes (each job goes to its builders' queue as
soon as it is put), so one `executor.run` call lasts for the Evaluator's life: builds run ahead on CPU
builders, each GPU's lanes take turns on the device lease and run the references of jobs still building,
a CPU gets one lane, exactly as in a batch of `kbench run`. (An
executor that takes its whole batch up front would get what is queued now and be called again for what
comes later; the Evaluator accepts only streaming ones, since Ray's tasks cannot carry its open store.) A
cpp candidate and a CUDA one submitted to one Evaluator on a GPU host go to different pumps, so neither
waits behind the other's device.

Nothing is lost: a job the executor handed out but never returned (an executor that raised) fails with
that error, and the pump starts the executor again for the jobs that come later, so every ticket ends
with a verdict, an error or a cancellation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator

from kbench.config import RunConfig
from kbench.executors import (
    BuildFn,
    EvalFn,
    Job,
    PrefetchFn,
    ResultFn,
    executor_options,
    get_executor,
    is_streaming,
)

FailFn = Callable[[Job, BaseException], None]  # a job handed out and never returned: fail its ticket
DoneFn = Callable[[Job], bool]  # whether a job has its outcome (verdict, error or cancellation)
Ends = tuple[DoneFn, FailFn]
Devices = tuple[str, ...]  # GPU lanes chosen by the caller (local executor), else every GPU of the spec
Fns = tuple[BuildFn, EvalFn, ResultFn, PrefetchFn | None]  # what the executor's run() is given


class Feed:
    """A queue of jobs read as an iterator: `stream()` blocks for more until closed, `drain()` does not."""

    def __init__(self, done: DoneFn) -> None:
        self._jobs: deque[Job] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self.done = done
        self.handed: list[Job] = []  # jobs given to the executor by the current run() and not yet done

    def put(self, job: Job) -> None:
        with self._changed:
            self._jobs.append(job)
            self._changed.notify_all()

    def close(self) -> list[Job]:
        """Stop feeding; returns the jobs never handed out."""
        with self._changed:
            self._closed = True
            left = list(self._jobs)
            self._jobs.clear()
            self._changed.notify_all()
        return left

    def wait(self) -> bool:
        """Block until a job is queued (True) or the feed is closed (False)."""
        with self._changed:
            self._changed.wait_for(lambda: self._jobs or self._closed)
            return bool(self._jobs) and not self._closed

    def _next(self, block: bool) -> Job | None:
        with self._changed:
            if block:
                self._changed.wait_for(lambda: self._jobs or self._closed)
            if self._closed or not self._jobs:
                return None
            job = self._jobs.popleft()
            # pruned as jobs are handed out, so a feed that lives as long as the Evaluator stays small
            self.handed = [j for j in self.handed if not self.done(j)] + [job]
            return job

    def stream(self) -> Iterator[Job]:
        while (job := self._next(block=True)) is not None:
            yield job

    def drain(self) -> Iterator[Job]:
        while (job := self._next(block=False)) is not None:
            yield job


class Pump:
    """One device spec's feed and the thread that runs the executor over it."""

    def __init__(self, cfg: RunConfig, spec: str, fns: Fns, ends: Ends, devices: Devices) -> None:
        self.feed = Feed(ends[0])
        self.streaming = is_streaming(cfg.executor)
        gpus = list(devices) if spec.startswith("cuda") else None
        options = executor_options(cfg.model_copy(update={"device": spec}), gpus)
        self._make = lambda: get_executor(cfg.executor, **options)
        self._fns, self._fail = fns, ends[1]
        self.thread = threading.Thread(target=self._run, name=f"kbench-pump-{spec}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.feed.wait():
            jobs = self.feed.stream() if self.streaming else self.feed.drain()
            error: BaseException | None = None
            try:
                self._make().run(jobs, *self._fns)
            except BaseException as exc:  # the executor's own failure: its jobs fail, the pump goes on
                error = exc
            handed, self.feed.handed = self.feed.handed, []
            for job in handed:
                if not self.feed.done(job):
                    self._fail(job, error or RuntimeError("the executor returned without this job's verdict"))
            if self.streaming and error is None:
                return  # a streaming run ends only when the feed is closed
            # after an executor's failure (or a batch run's end) the next job starts a new run

    def close(self) -> list[Job]:
        return self.feed.close()


class Lanes:
    """Pumps by device spec, started on first use."""

    def __init__(self, cfg: RunConfig, fns: Fns, ends: Ends, devices: Devices = ()) -> None:
        self.cfg, self._fns, self._ends, self._devices = cfg, fns, ends, devices
        self._pumps: dict[str, Pump] = {}
        self._lock = threading.Lock()

    def put(self, spec: str, job: Job) -> None:
        with self._lock:
            pump = self._pumps.get(spec)
            if pump is None:
                pump = self._pumps[spec] = Pump(self.cfg, spec, self._fns, self._ends, self._devices)
        pump.feed.put(job)

    def close(self, timeout: float | None = None) -> list[Job]:
        """Close every feed (returns the jobs never handed out) and wait for the pumps to finish."""
        with self._lock:
            pumps = list(self._pumps.values())
        left = [job for pump in pumps for job in pump.close()]
        for pump in pumps:
            pump.thread.join(timeout)
        return left
