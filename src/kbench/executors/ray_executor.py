"""The Ray executor: one long-lived lane actor per GPU, builds as CPU tasks.

Works against a local Ray (started here when none is running) or a cluster (`--ray-address`). Every GPU
of the cluster gets one lane: an actor holding that GPU (`num_gpus=1`) until `close`, with `slots`
evaluations in flight whose GPU phases take turns on the device lease, exactly as a GPU's lanes of the
local executor. An actor, unlike a task, keeps one process, its GPU (`CUDA_VISIBLE_DEVICES` set by Ray for
the actor's life) and its warm state (starter, reference outputs) from job to job: Ray ends the worker
process of a GPU task after every call (`max_calls=1` is its default for tasks with GPUs), so evaluations
as tasks would import torch and kbench and start a warm starter afresh for every verdict. Builds run as
CPU tasks (`num_cpus=1`) and reach the lanes in completion order. Without GPUs (or `gpus_per_job=0`) the
lanes evaluate on the CPU, one job at a time each: `cpu_lanes` of them, by default half as many as the
cluster has CPUs when timing (the builds take the rest) and as many without; each holds a lane number of
its node (lease.claim_cpu_lane) that pins its workers to cores no other lane there uses. Results
come back to the host, which alone writes the store. A run takes its jobs as they come: an Evaluator's
pump hands it the Evaluator's open feed, so a job submitted while others run is built and goes to the next
free lane slot at once, and one that hangs holds only its own slot. The lanes outlive a run; `close` (the
pump's end) ends them, and their evaluation workers with them.
"""

from __future__ import annotations

import os
import queue
import tempfile
import threading
from collections import deque
from collections.abc import Iterable
from typing import Any

from kbench.config import RunConfig
from kbench.errors import ConfigError, require
from kbench.executors import register_executor
from kbench.executors.base import BuildFn, EvalFn, Job, PrefetchFn, ResultFn
from kbench.types import BuildResult, Verdict

_init_lock = threading.Lock()
FEED_POLL_S = 0.05  # how often a run whose feed is open looks for new jobs while others are in flight


def _init_for_good(ray: Any, kwargs: dict[str, Any]) -> None:
    """`ray.init` in a thread that lives as long as this process. Ray asks the kernel to kill the processes
    of a local cluster it starts (its GCS, its raylet) when the *thread* that started them ends
    (PR_SET_PDEATHSIG follows the thread): started from the thread of one executor run (an Evaluator's
    pump), the cluster died with that thread, and this process, still a Ray driver, ended itself a minute
    later for want of its GCS."""
    with _init_lock:
        if ray.is_initialized():
            return
        done, failed = threading.Event(), []

        def keep() -> None:
            try:
                ray.init(**kwargs)
            except BaseException as exc:  # handed to the caller below
                failed.append(exc)
            finally:
                done.set()
            threading.Event().wait()  # never ends: the cluster's processes live as long as this process

        threading.Thread(target=keep, name="kbench-ray", daemon=True).start()
        done.wait()
        if failed:
            raise failed[0]


def _build_remote(build: BuildFn, job: Job) -> BuildResult | None:
    return build(job)


class Lane:
    """One GPU (or a share of the CPUs) for the run's length: evaluations run here, never in a task."""

    def __init__(self, gpu: bool) -> None:
        self.cpu_lane = 0
        if gpu:
            import torch

            if torch.cuda.device_count() < 1:
                shown = os.environ.get("CUDA_VISIBLE_DEVICES")
                raise RuntimeError(f"a Ray GPU lane sees no GPU (CUDA_VISIBLE_DEVICES={shown!r})")
        else:
            from kbench.sandbox.lease import claim_cpu_lane

            self.cpu_lane = claim_cpu_lane()

    def evaluate(self, evaluate: EvalFn, job: Job, device: str, built: BuildResult | None) -> Verdict:
        """On this lane's GPU, or on the CPU with its workers on this lane's cores (`cpu/N`)."""
        lane = f"{device}/{self.cpu_lane}" if device == "cpu" and self.cpu_lane else device
        return evaluate(job, lane, built)


class RayExecutor:
    lane_class: type[Lane] = Lane  # what each lane actor runs

    def __init__(
        self,
        address: str | None = None,
        gpus_per_job: float | None = None,
        num_cpus: int | None = None,
        slots: int = 3,
        tmp_dir: str | None = None,
        cpu_lanes: int = 0,
        timed: bool = True,
    ):
        self.address = address
        self.tmp_dir = tmp_dir
        self.gpus_per_job = gpus_per_job
        self.num_cpus = num_cpus
        self.slots = max(1, slots)
        self.cpu_lanes, self.timed = cpu_lanes, timed
        # lanes live from this executor's first run to `close`: each holds its process, GPU and warm state
        # (starter, imports) for every later run, so a service's next batch does not start them again
        self._made: tuple[list[Any], str, int] = ([], "cpu", 1)
        self._actor: Any = None
        self._room = 1

    def _init(self) -> Any:
        ray = require("ray", "ray")
        if not ray.is_initialized():
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            kwargs: dict[str, Any] = {"ignore_reinit_error": True, "include_dashboard": False}
            if self.address:
                kwargs["address"] = self.address
            else:
                kwargs["num_cpus"] = self.num_cpus
                kwargs["_temp_dir"] = self.tmp_dir or tempfile.mkdtemp(prefix="kbench-ray-")
            _init_for_good(ray, kwargs)
        return ray

    def _lanes(self, ray: Any, jobs: int) -> tuple[list[Any], str, int]:
        """The lane actors, the device they evaluate on and the evaluations each takes at once: those of
        this executor's earlier runs, and more while the cluster has room and `jobs` asks for them."""
        lanes, device, slots = self._made
        if lanes:
            want = min(self._room, jobs)
            lanes += [self._actor.remote(device == "cuda") for _ in range(max(0, want - len(lanes)))]
            return lanes, device, slots
        resources = ray.cluster_resources()
        gpus = self.gpus_per_job
        if gpus is None:
            gpus = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
        if gpus > 0:
            count = int(resources.get("GPU", 0) // gpus)
            if count < 1:
                raise ConfigError(
                    f"the Ray cluster has {resources.get('GPU', 0)} GPUs; a job asks for {gpus}"
                )
            actor = ray.remote(num_gpus=gpus, num_cpus=0, max_concurrency=self.slots)(self.lane_class)
            device, slots = "cuda", self.slots
        else:  # one job at a time per lane; when timing, half the CPUs left for builds
            count = self.cpu_lanes or max(1, int(resources.get("CPU", 1)) // (2 if self.timed else 1))
            actor = ray.remote(num_cpus=0, max_concurrency=1)(self.lane_class)
            device, slots = "cpu", 1
        self._actor, self._room = actor, max(1, count)
        self._made = ([actor.remote(gpus > 0) for _ in range(max(1, min(count, jobs)))], device, slots)
        return self._made

    def run(
        self,
        jobs: Iterable[Job],
        build: BuildFn,
        evaluate: EvalFn,
        on_result: ResultFn,
        prefetch: PrefetchFn | None = None,
    ) -> None:
        """Every job of `jobs`, taken as it comes: an iterator that stays open (an Evaluator's feed) hands
        over jobs while earlier ones build and run, and each goes to a free lane slot as soon as it is
        built, so a job that hangs holds its own slot only, never the jobs that come after it. Returns
        once `jobs` is exhausted and every job taken has its result. `prefetch` is not used here: a lane
        actor takes only built jobs, and each evaluation runs (or shares) its reference when it starts."""
        ray = self._init()
        arrived: queue.Queue[Any] = queue.Queue()
        end = object()

        def take() -> None:
            try:
                for job in jobs:
                    arrived.put(job)
            except BaseException as exc:  # the feed's own failure ends the run with it
                arrived.put(exc)
            finally:
                arrived.put(end)

        threading.Thread(target=take, name="kbench-ray-feed", daemon=True).start()
        build_task = ray.remote(num_cpus=1, num_gpus=0)(_build_remote)
        build_ref, eval_ref = ray.put(build), ray.put(evaluate)
        pending_builds: dict[Any, Job] = {}
        ready: deque[tuple[Job, Any]] = deque()  # built, waiting for a lane slot
        pending_evals: dict[Any, tuple[Job, int]] = {}
        lanes: list[Any] = []
        busy: list[int] = []
        device, slots, open_ = "cpu", 1, True
        try:
            while open_ or pending_builds or pending_evals or ready:
                idle = not (pending_builds or pending_evals or ready)
                while open_:  # what has arrived (with nothing in flight, wait for it)
                    try:
                        item = arrived.get(timeout=None) if idle else arrived.get_nowait()
                    except queue.Empty:
                        break
                    idle = False
                    if item is end:
                        open_ = False
                    elif isinstance(item, BaseException):
                        raise item
                    else:
                        pending_builds[build_task.remote(build_ref, item)] = item
                if pending_builds or ready:
                    lanes, device, slots = self._lanes(
                        ray, len(pending_builds) + len(ready) + len(pending_evals)
                    )
                    busy += [0] * (len(lanes) - len(busy))
                while ready and min(busy) < slots:
                    lane = busy.index(min(busy))
                    job, built = ready.popleft()
                    pending_evals[lanes[lane].evaluate.remote(eval_ref, job, device, built)] = (job, lane)
                    busy[lane] += 1
                refs = list(pending_builds) + list(pending_evals)
                if not refs:
                    continue
                # while the feed is open, look for new jobs between results (FEED_POLL_S at most)
                done, _ = ray.wait(refs, num_returns=1, timeout=FEED_POLL_S if open_ else None)
                if not done:
                    continue
                ref = done[0]
                if ref in pending_builds:
                    ready.append((pending_builds.pop(ref), ref))
                else:
                    job, lane = pending_evals.pop(ref)
                    busy[lane] -= 1
                    on_result(job, ray.get(ref))
        finally:
            for ref in pending_builds:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        """End the lanes (their evaluation workers die with them, sandbox/procs.py)."""
        lanes, _, _ = self._made
        if lanes:
            import ray

            for lane_actor in lanes:
                ray.kill(lane_actor)
            lanes.clear()


def _ray_options(cfg: RunConfig) -> dict[str, object]:
    tmp_dir = str(cfg.ray_tmp) if cfg.ray_tmp else None
    return {"address": cfg.ray_address, "tmp_dir": tmp_dir, "slots": cfg.gpu_slots, "cpu_lanes": cfg.cpu_lanes,
            "timed": cfg.measure}  # fmt: skip


@register_executor("ray", _ray_options, open_feed=True)
def _make_ray(**options: object) -> RayExecutor:
    allowed = {"address", "gpus_per_job", "num_cpus", "slots", "tmp_dir", "cpu_lanes", "timed"}
    return RayExecutor(**{k: v for k, v in options.items() if k in allowed})  # type: ignore[arg-type]
