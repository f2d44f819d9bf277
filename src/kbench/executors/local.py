"""The local executor: one GPU phase per device at a time, CPU builders ahead of the queue.

Timing is only meaningful when a GPU runs one job at a time. A GPU gets `slots` lanes (threads that
each launch one evaluation after another), and the workers of those evaluations take the device's lease
(sandbox/lease.py) before any GPU work: so their process start and imports (~2-4 s per worker) overlap
another job's GPU phase, while outputs, checks and timing still run one job at a time. A CPU device gets
`cpu_lanes` lanes (`cpu_lane_count`: by default one when timing, for there the CPU is the thing timed,
else one per core), each evaluating one job at a time with its workers on cores of their own
(`isolate.share_cores`), so a candidate that hangs holds its own lane only and timed lanes never share a
core: with timing, lanes x `cpu_threads` may not exceed the usable cores. Compilation is the expensive
part (tens of seconds per load_inline extension), so builders compile candidates in parallel and hand
them over as they finish; a lane never waits for a build that another job could skip ahead of. Jobs wait
for a builder, and built ones for a lane, by `Job.priority` (higher first), then in arrival order. A GPU lane with
nothing built to evaluate prefetches for a job still building or next in line for a builder (its
reference run, when the caller gives a `prefetch`), so the first part of that job's GPU work is done before
its build is.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterable
from typing import cast

from kbench.config import RunConfig
from kbench.executors import register_executor
from kbench.executors.base import BuildFn, EvalFn, Job, PrefetchFn, ResultFn
from kbench.types import BuildResult

_DONE = object()
_LAST = 1 << 62  # the queue key of _DONE: after every job, whatever its priority
PREFETCH_POLL_S = 0.2  # how often a GPU lane with nothing built to evaluate looks for a job to prefetch for


def local_devices(device: str = "auto") -> list[str]:
    """Lanes for a device spec: `auto` = every visible GPU (else one cpu lane), `cuda` = all GPUs."""
    if device not in ("auto", "cuda"):
        return [device]
    from kbench.hardware import gpu_count

    count = gpu_count()  # NVML: no torch import or CUDA initialisation in the host (hardware.visible_gpus)
    if count == 0:
        if device == "cuda":
            from kbench.errors import ConfigError

            raise ConfigError("device 'cuda' requested but torch sees no GPU; use --device cpu")
        return ["cpu"]
    return [f"cuda:{i}" for i in range(count)]


def usable_cpus() -> int:
    """The cores this process may run on (its affinity mask: taskset, cgroup cpusets), else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 2


BUILD_CORES = 1.5  # cores one CUDA builder keeps busy on average (default_builders)


def default_builders(cpus: int, devices: list[str], timed: bool = True) -> int:
    """Builders that fill the cores without starving the GPU lanes.

    Two cores per GPU stay free for its lanes' worker processes: measured on a 16-core H200 host with 16
    builders, a worker's start (importing torch) took 8-16 s instead of ~3 s, and the GPU sat idle 64 % of
    the time while verdicts were due. A load_inline build compiles two translation units at once, but the
    bindings one (precompiled or lean headers) ends well before the CUDA one, so a builder keeps about
    BUILD_CORES busy, not two: with one builder per two cores (7 on that host) the CPUs were 70 % busy
    while the builds ran, and the builds, not the GPU, ended the 48-candidate throughput batch. Without a
    GPU the CPU lane times candidates beside the builds, which that count does not cover: one per two cores;
    one per core when nothing is timed (a candidate whose import sleeps then holds one builder of two even
    on a 2-core machine, not the only one).
    """
    gpus = sum(d.startswith("cuda") for d in devices)
    return max(1, int((cpus - 2 * gpus) / (BUILD_CORES if gpus else 2 if timed else 1)))


def cpu_lane_count(lanes: int, threads: int, timed: bool) -> int:
    """CPU lanes for the `cpu_lanes` setting: 0 is one lane when timing (the CPU is the thing timed and
    the builders share it), else one per `threads` usable cores. Timed lanes may not share a core: more
    than the usable cores / `threads` is a ConfigError."""
    threads, usable = max(1, threads), usable_cpus()
    if lanes == 0:
        return 1 if timed else max(1, usable // threads)
    if timed and lanes > 1 and lanes * threads > usable:
        from kbench.errors import ConfigError

        raise ConfigError(
            f"{lanes} CPU lanes of {threads} thread(s) need {lanes * threads} cores and this process may use "
            f"{usable}: timed lanes must not share a core (set cpu_lanes to at most {max(1, usable // threads)}, "
            "or evaluate without timing)"
        )
    return lanes


class LocalExecutor:
    def __init__(
        self,
        devices: list[str] | None = None,
        builders: int = 0,
        device: str = "auto",
        slots: int = 3,
        cpu_lanes: int = 1,  # executors.local.cpu_lane_count: 0 = by timing and cores
        cpu_threads: int = 1,
        timed: bool = True,
    ) -> None:
        self.devices = devices or local_devices(device)
        self.builders = builders or default_builders(usable_cpus(), self.devices, timed)
        self.slots = max(1, slots)
        self.cpu_lanes = cpu_lane_count(cpu_lanes, cpu_threads, timed) if "cpu" in self.devices else 1

    def lanes(self) -> list[str]:
        """`cpu_lanes` per CPU device (`cpu`, `cpu/1`, ...: lane_device), `slots` per GPU (their GPU phases
        serialise on the device lease)."""
        out = []
        for d in self.devices:
            if d.startswith("cuda"):
                out += [d] * self.slots
            else:
                out += [d] + [f"{d}/{i}" for i in range(1, self.cpu_lanes)]
        return out

    def run(
        self,
        jobs: Iterable[Job],
        build: BuildFn,
        evaluate: EvalFn,
        on_result: ResultFn,
        prefetch: PrefetchFn | None = None,
    ) -> None:
        """With `prefetch`, a GPU lane with nothing built to evaluate prefetches for a job on a builder, or
        for one of the next `builders` jobs waiting for one (its reference run), so the device's lease does
        that job's first part while builds run instead of after them: a batch of cold builds otherwise
        leaves the GPU idle until the first build is done. Looking past the jobs on builders matters when
        builds outlast the lease's work on the references of those jobs: on an H200 host, 7 cold CUDA builds
        at a time took ~17 s while their 7 references held the lease ~1 s each."""
        ready: queue.PriorityQueue[tuple[int, int, object]] = queue.PriorityQueue()  # (-priority, order, job)
        lock = threading.Lock()
        errors: list[BaseException] = []
        upcoming = _Upcoming(ahead=self.builders)

        def idle(device: str) -> None:
            job = upcoming.claim()
            if job is None or prefetch is None:
                return
            try:
                prefetch(job, device)
            except Exception:  # noqa: BLE001  (best effort: the job's evaluation runs it and says what failed)
                pass
            except BaseException as exc:  # a stop signal: as from an evaluation
                errors.append(exc)

        def lane(device: str) -> None:
            ahead = prefetch is not None and device.startswith("cuda")
            while True:
                try:
                    _, _, item = ready.get(timeout=PREFETCH_POLL_S) if ahead else ready.get()
                except queue.Empty:
                    idle(device)
                    continue
                if item is _DONE:
                    return
                job, built = cast(tuple[Job, BuildResult | None], item)
                try:
                    verdict = evaluate(job, device, built)
                except BaseException as exc:  # our own failure: stop cleanly, re-raise on the caller
                    errors.append(exc)
                    continue
                with lock:
                    on_result(job, verdict)

        lanes = [
            threading.Thread(target=lane, args=(d,), name=f"lane-{d}-{i}") for i, d in enumerate(self.lanes())
        ]
        for t in lanes:
            t.start()
        try:
            self._build_all(jobs, build, ready, errors, upcoming)
        finally:
            for i, _ in enumerate(lanes):
                ready.put((_LAST, i, _DONE))  # after every job: they were all put before
            for t in lanes:
                t.join()
        if errors:
            raise errors[0]

    def _build_all(
        self,
        jobs: Iterable[Job],
        build: BuildFn,
        ready: queue.PriorityQueue[tuple[int, int, object]],
        errors: list,
        upcoming: _Upcoming,
    ) -> None:
        """Jobs wait for a builder in a queue by priority (then order), so a job of higher priority put
        while others wait is built first; built ones wait for a lane the same way."""
        waiting: queue.PriorityQueue[tuple[int, int, object]] = queue.PriorityQueue()

        def builder() -> None:
            while True:
                _, index, item = waiting.get()
                if item is _DONE:
                    return
                job = cast(Job, item)
                upcoming.started(index)
                try:
                    built: BuildResult | None = build(job)
                except BaseException as exc:
                    errors.append(exc)
                    continue
                finally:
                    upcoming.finished(index)
                ready.put((-job.priority, index, (job, built)))

        threads = [
            threading.Thread(target=builder, name=f"builder-{i}", daemon=True) for i in range(self.builders)
        ]
        for t in threads:
            t.start()
        try:
            for index, job in enumerate(jobs):
                if errors:
                    break
                upcoming.queued(index, job)
                waiting.put((-job.priority, index, job))
        finally:
            for i, _ in enumerate(threads):
                waiting.put((_LAST, i, _DONE))  # after every job waiting: builders finish them first
            for t in threads:
                t.join()


class _Upcoming:
    """The jobs not built yet, in the order they reach a builder (index order): those on a builder and
    those waiting for one. `claim` hands each out for a prefetch once: the lowest index unclaimed (the
    soonest to be evaluated) among the jobs on a builder and the first `ahead` jobs waiting. Not further:
    a reference run far ahead of its candidate holds its outputs in memory all the while."""

    def __init__(self, ahead: int = 0) -> None:
        self.ahead = ahead
        self._lock = threading.Lock()
        self._jobs: dict[int, Job] = {}  # index -> job, in index order
        self._waiting: set[int] = set()  # of those, the jobs not on a builder yet
        self._claimed: set[int] = set()

    def queued(self, index: int, job: Job) -> None:
        with self._lock:
            self._jobs[index] = job
            self._waiting.add(index)

    def started(self, index: int) -> None:
        with self._lock:
            self._waiting.discard(index)

    def finished(self, index: int) -> None:
        with self._lock:  # nothing of a built job is kept: an Evaluator's run lasts as long as it is open
            self._jobs.pop(index, None)
            self._waiting.discard(index)
            self._claimed.discard(index)

    def claim(self) -> Job | None:
        with self._lock:
            waited = 0
            for index in self._jobs:
                if index in self._waiting:
                    if waited >= self.ahead:
                        return None
                    waited += 1
                if index not in self._claimed:
                    self._claimed.add(index)
                    return self._jobs[index]
            return None


def _local_options(cfg: RunConfig) -> dict[str, object]:
    return {"device": cfg.device, "builders": cfg.builders, "slots": cfg.gpu_slots,
            "cpu_lanes": cfg.cpu_lanes, "cpu_threads": cfg.cpu_threads, "timed": cfg.measure}  # fmt: skip


@register_executor("local", _local_options, streaming=True, devices=True)
def _make_local(**options: object) -> LocalExecutor:
    return LocalExecutor(**options)  # type: ignore[arg-type]
