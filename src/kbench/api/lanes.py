"""The Evaluator's queue: submissions flow into the executors `kbench run` uses, for as long as it is open.

One pump per device spec (`cpu`, `cuda` = every GPU, `cuda:N`): a thread that hands the executor a `Feed`
of jobs. The local executor consumes a feed as it comes (each job goes to its builders' queue as soon as
it is put), so one `executor.run` call lasts for the Evaluator's life: builds run ahead on CPU builders,
each GPU's lanes take turns on the device lease and run the references of jobs still building, a CPU gets
`cpu_lanes` lanes, exactly as in a batch of `kbench run`. Ray, whose workers are given each job's work as
a portable copy (api/runner.py), takes the same open feed (`takes_open_feed`): a job submitted while
others run starts in the next free lane slot, never after the jobs ahead of it have all ended, so one that
hangs holds only its own slot. (An executor that takes its whole batch up front gets what is queued now
and is called again for what comes later.) A cpp candidate and a CUDA one submitted to one Evaluator on a
GPU host go to different pumps, so neither waits behind the other's device.

Nothing is lost: a job the executor handed out but never returned (an executor that raised) fails with
that error, and the pump starts the executor again for the jobs that come later, so every ticket ends
with a verdict, an error or a cancellation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator

from kbench.api.runner import Runner
from kbench.config import RunConfig
from kbench.executors import Executor, Job, executor_options, get_executor, is_streaming, takes_open_feed

Devices = tuple[str, ...]  # GPU lanes chosen by the caller (local executor), else every GPU of the spec


def _close(executor: Executor | None) -> None:
    """End what an executor keeps between its runs (Ray's lane actors live from its first batch to here)."""
    close = getattr(executor, "close", None)
    if close is not None:
        close()


def _done(job: Job) -> bool:
    """Whether a job has its outcome (verdict, error or cancellation)."""
    return bool(job.tag.done())


class Feed:
    """A queue of jobs read as an iterator: `stream()` blocks for more until closed, `drain()` does not."""

    def __init__(self) -> None:
        self._jobs: deque[Job] = deque()
        self._changed = threading.Condition()
        self._closed = False
        self.handed: list[Job] = []  # jobs given to the executor by the current run() and not yet done

    def put(self, jobs: list[Job]) -> None:
        """Queue jobs at once: a batch executor's run takes them together."""
        with self._changed:
            self._jobs.extend(jobs)
            self._changed.notify_all()

    def close(self) -> list[Job]:
        """Stop feeding; returns the jobs never handed out."""
        with self._changed:
            self._closed = True
            left = list(self._jobs)
            self._jobs.clear()
            self._changed.notify_all()
        return left

    def waiting(self) -> int:
        """Jobs queued and not handed out yet."""
        with self._changed:
            return len(self._jobs)

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
            self.handed = [j for j in self.handed if not _done(j)] + [job]
            return job

    def stream(self) -> Iterator[Job]:
        while (job := self._next(block=True)) is not None:
            yield job

    def drain(self) -> Iterator[Job]:
        while (job := self._next(block=False)) is not None:
            yield job


class Pump:
    """One device spec's feed and the thread that runs the executor over it."""

    def __init__(self, cfg: RunConfig, spec: str, runner: Runner, devices: Devices) -> None:
        self.feed = Feed()
        self.streaming = is_streaming(cfg.executor)
        self.open_feed = takes_open_feed(cfg.executor)
        gpus = list(devices) if spec.startswith("cuda") else None
        options = executor_options(cfg.model_copy(update={"device": spec}), gpus)
        self._make = lambda: get_executor(cfg.executor, **options)
        self._runner = runner
        self.thread = threading.Thread(target=self._run, name=f"kbench-pump-{spec}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        executor: Executor | None = None
        try:
            while self.feed.wait():
                error: BaseException | None = None
                try:
                    executor = executor or self._make()
                    if self.streaming:
                        executor.run(self.feed.stream(), *self._runner.local_fns())
                    elif self.open_feed:  # one run for the feed's life: later jobs start beside earlier
                        self._runner.run_elsewhere(executor, self.feed.stream(), self.feed.waiting)
                    else:
                        self._runner.run_elsewhere(executor, list(self.feed.drain()))
                except BaseException as exc:  # the executor's own failure: its jobs fail, the pump goes on
                    error = exc
                    if executor is None:  # it could not be made: what waits for it fails the same way
                        list(self.feed.drain())
                handed, self.feed.handed = self.feed.handed, []
                for job in handed:
                    if not _done(job):
                        self._runner.lost(
                            job, error or RuntimeError("the executor returned without this job's verdict")
                        )
                if error is not None:  # a failed executor is not used again: the next job makes another
                    _close(executor)
                    executor = None
                elif self.streaming or self.open_feed:
                    return  # a run over the open feed ends only when the feed is closed
        finally:
            _close(executor)

    def close(self) -> list[Job]:
        return self.feed.close()


class Lanes:
    """Pumps by device spec, started on first use."""

    def __init__(self, cfg: RunConfig, runner: Runner, devices: Devices = ()) -> None:
        self.cfg, self._runner, self._devices = cfg, runner, devices
        self._pumps: dict[str, Pump] = {}
        self._lock = threading.Lock()

    def put(self, spec: str, jobs: list[Job]) -> None:
        with self._lock:
            pump = self._pumps.get(spec)
            if pump is None:
                pump = self._pumps[spec] = Pump(self.cfg, spec, self._runner, self._devices)
        pump.feed.put(jobs)

    def close(self, timeout: float | None = None) -> list[Job]:
        """Close every feed (returns the jobs never handed out) and wait for the pumps to finish."""
        with self._lock:
            pumps = list(self._pumps.values())
        left = [job for pump in pumps for job in pump.close()]
        for pump in pumps:
            pump.thread.join(timeout)
        return left
