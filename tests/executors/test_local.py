"""The local executor's scheduling, with fake devices and fake build/evaluate functions."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from kbench.executors import Job, get_executor
from kbench.executors.local import LocalExecutor
from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

PROBLEM = Problem(source="t", level=2, number=1, name="p", code="")


def _jobs(n: int) -> list[Job]:
    return [Job(PROBLEM, Candidate(PROBLEM.key, "cpp", f"src{i}"), tag=i) for i in range(n)]


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: Counter[str] = Counter()
        self.max_active: Counter[str] = Counter()
        self.builds_active = 0
        self.max_builds = 0
        self.devices_used: Counter[str] = Counter()

    def build(self, job: Job) -> BuildResult:
        with self.lock:
            self.builds_active += 1
            self.max_builds = max(self.max_builds, self.builds_active)
        time.sleep(0.02)
        with self.lock:
            self.builds_active -= 1
        return BuildResult(ok=True, backend="cpp", log=job.candidate.source)

    def evaluate(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        assert built is not None and built.log == job.candidate.source  # the job's own build
        with self.lock:
            self.active[device] += 1
            self.max_active[device] = max(self.max_active[device], self.active[device])
            self.devices_used[device] += 1
        time.sleep(0.01)
        with self.lock:
            self.active[device] -= 1
        return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device)


def test_one_timed_job_per_device_and_parallel_builders() -> None:
    rec = Recorder()
    results: list[tuple[int, str]] = []
    ex = LocalExecutor(devices=["cuda:0", "cuda:1", "cuda:2"], builders=4, slots=1)
    ex.run(_jobs(30), rec.build, rec.evaluate, lambda j, v: results.append((j.tag, v.device)))
    assert sorted(tag for tag, _ in results) == list(range(30))  # every job once
    assert set(rec.max_active.values()) == {1}  # never two timed jobs on one device
    assert set(rec.devices_used) == {"cuda:0", "cuda:1", "cuda:2"}  # all devices used
    assert rec.max_builds > 1  # builders overlap


def test_gpu_slots_overlap_evaluations_but_cpu_gets_one_lane() -> None:
    """With slots, evaluations overlap on a GPU (their workers serialise on the lease); never on a CPU."""
    ex = LocalExecutor(devices=["cuda:0", "cuda:1", "cpu"], builders=2, slots=3)
    assert sorted(ex.lanes()) == ["cpu"] + ["cuda:0"] * 3 + ["cuda:1"] * 3
    rec = Recorder()
    results: list[int] = []
    ex.run(_jobs(40), rec.build, rec.evaluate, lambda j, v: results.append(j.tag))
    assert sorted(results) == list(range(40))
    assert 1 < max(rec.max_active["cuda:0"], rec.max_active["cuda:1"]) <= 3
    assert rec.max_active["cpu"] <= 1


def test_evaluation_error_propagates_after_draining() -> None:
    def evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
        raise RuntimeError("our bug")

    ex = LocalExecutor(devices=["cpu"], builders=1)
    with pytest.raises(RuntimeError, match="our bug"):
        ex.run(_jobs(3), lambda j: None, evaluate, lambda j, v: None)


class Builds:
    """Builds that take `seconds` (per tag: `slow`) and say when each ended, evaluations that take
    `evaluate_s`, and a prefetch that records what it was given."""

    def __init__(
        self,
        seconds: float = 0.3,
        fail: BaseException | None = None,
        slow: dict[int, float] | None = None,
        evaluate_s: float = 0.0,
    ) -> None:
        self.seconds, self.fail, self.slow, self.evaluate_s = seconds, fail, slow or {}, evaluate_s
        self.lock = threading.Lock()
        self.built_at: dict[int, float] = {}
        self.prefetched: list[tuple[int, str, float]] = []  # (tag, device, when it started)

    def build(self, job: Job) -> BuildResult:
        time.sleep(self.slow.get(job.tag, self.seconds))
        with self.lock:
            self.built_at[job.tag] = time.monotonic()
        return BuildResult(ok=True, backend="cpp", log=job.candidate.source)

    def evaluate(self, job: Job, device: str, built: BuildResult | None) -> Verdict:
        time.sleep(self.evaluate_s)
        return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device)

    def prefetch(self, job: Job, device: str) -> None:
        with self.lock:
            self.prefetched.append((job.tag, device, time.monotonic()))
        if self.fail is not None:
            raise self.fail


def test_idle_gpu_lanes_prefetch_for_jobs_still_building_each_once() -> None:
    b = Builds()
    results: list[int] = []
    ex = LocalExecutor(devices=["cuda:0"], builders=2, slots=2)
    ex.run(_jobs(6), b.build, b.evaluate, lambda j, v: results.append(j.tag), b.prefetch)
    assert sorted(results) == list(range(6))
    tags = [tag for tag, _, _ in b.prefetched]
    assert len(tags) == len(set(tags)) and {0, 1} <= set(tags)  # the first builds' jobs, each once
    assert all(device == "cuda:0" for _, device, _ in b.prefetched)
    assert all(when < b.built_at[tag] for tag, _, when in b.prefetched)  # only while the job built


def test_a_lane_idle_after_short_builds_prefetches_only_the_long_one() -> None:
    """Job 0 builds for 1.5 s while the others build and are evaluated; the lane, idle after them, takes
    job 0 for a prefetch and never a job whose build has ended."""
    b = Builds(seconds=0.05, slow={0: 1.5}, evaluate_s=0.2)
    results: list[int] = []
    LocalExecutor(devices=["cuda:0"], builders=2, slots=1).run(
        _jobs(4), b.build, b.evaluate, lambda j, v: results.append(j.tag), b.prefetch
    )
    assert sorted(results) == [0, 1, 2, 3]
    assert [tag for tag, _, _ in b.prefetched] == [0]
    assert b.prefetched[0][2] < b.built_at[0]


def test_cpu_lanes_and_runs_without_prefetch_never_prefetch() -> None:
    b = Builds(seconds=0.1)
    LocalExecutor(devices=["cpu"], builders=2).run(
        _jobs(3), b.build, b.evaluate, lambda j, v: None, b.prefetch
    )
    assert b.prefetched == []
    done: list[int] = []
    LocalExecutor(devices=["cuda:0"], builders=2).run(
        _jobs(3), b.build, b.evaluate, lambda j, v: done.append(1)
    )
    assert len(done) == 3 and b.prefetched == []


def test_a_failed_prefetch_is_left_to_the_evaluation_but_a_stop_is_not() -> None:
    b = Builds(fail=RuntimeError("reference failed"))
    results: list[int] = []
    LocalExecutor(devices=["cuda:0"], builders=2).run(
        _jobs(4), b.build, b.evaluate, lambda j, v: results.append(j.tag), b.prefetch
    )
    assert b.prefetched and sorted(results) == [0, 1, 2, 3]  # every job still evaluated
    stop = Builds(fail=KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        LocalExecutor(devices=["cuda:0"], builders=2).run(
            _jobs(4), stop.build, stop.evaluate, lambda j, v: None, stop.prefetch
        )


def test_registry_and_unknown_name() -> None:
    assert isinstance(get_executor("local", devices=["cpu"]), LocalExecutor)
    from kbench.errors import ConfigError

    with pytest.raises(ConfigError, match="local"):
        get_executor("nonesuch")


def test_default_builders_leave_cores_to_the_lanes() -> None:
    from kbench.executors.local import default_builders

    assert default_builders(16, ["cuda:0"]) == 9  # 14 cores at 1.5 per build + 2 for the lanes' workers
    assert default_builders(32, ["cuda:0", "cuda:1"]) == 18
    assert default_builders(2, ["cpu"]) == 1 and default_builders(1, ["cuda:0"]) == 1
    assert default_builders(16, ["cpu"]) == 8  # no GPU: the CPU lane times beside them, two cores each
    assert default_builders(16, ["cpu"], timed=False) == 16 and default_builders(2, ["cpu"], timed=False) == 2


def test_builders_count_the_cores_this_process_may_use(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from kbench.executors import local

    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
    monkeypatch.setattr(os, "cpu_count", lambda: 32)
    assert local.usable_cpus() == 10
    assert local.LocalExecutor(devices=["cuda:0"]).builders == 5  # (10 - 2) / 1.5, not (32 - 2) / 1.5


def test_idle_lanes_prefetch_past_the_builders_by_one_round_of_jobs() -> None:
    """One builder, builds of 0.7 s: while job 0 builds, the idle lane (it looks every 0.2 s) prefetches
    job 0 and then the one job waiting next (`ahead` = builders), never a job further back; later jobs
    come into reach as builds end. Every prefetch starts before its job's build ends."""
    b = Builds(seconds=0.7)
    results: list[int] = []
    LocalExecutor(devices=["cuda:0"], builders=1, slots=1).run(
        _jobs(4), b.build, b.evaluate, lambda j, v: results.append(j.tag), b.prefetch
    )
    assert sorted(results) == [0, 1, 2, 3]
    tags = [tag for tag, _, _ in b.prefetched]
    assert tags[:2] == [0, 1] and len(tags) == len(set(tags))
    assert b.prefetched[1][2] < b.built_at[0]  # job 1 while it still waited for the builder
    assert all(when < b.built_at[tag] for tag, _, when in b.prefetched)
    # job 2 is taken only after job 0's build ended (it was two places back before that)
    assert all(when > b.built_at[0] for tag, _, when in b.prefetched if tag >= 2)


def test_claim_order_and_reach() -> None:
    from kbench.executors.local import _Upcoming

    jobs = _jobs(6)
    up = _Upcoming(ahead=2)
    for i, job in enumerate(jobs):
        up.queued(i, job)
    up.started(0)
    up.started(1)
    claimed = [up.claim(), up.claim(), up.claim(), up.claim(), up.claim()]
    assert [j.tag if j else None for j in claimed] == [0, 1, 2, 3, None]  # two builders + two waiting
    up.finished(0)
    up.started(2)  # job 2 reaches a builder: job 4 comes into reach
    assert (j := up.claim()) is not None and j.tag == 4
    assert up.claim() is None
    for i in range(6):
        up.finished(i)
    # nothing of a built job is kept: an Evaluator's executor run lasts as long as the Evaluator
    assert not (up._jobs or up._waiting or up._claimed)
    none_ahead = _Upcoming(ahead=0)
    none_ahead.queued(0, jobs[0])
    assert none_ahead.claim() is None  # waiting, out of reach: only jobs on a builder
    none_ahead.started(0)
    assert (j := none_ahead.claim()) is not None and j.tag == 0


def test_jobs_of_higher_priority_are_built_and_evaluated_first() -> None:
    """One builder, one lane: while the first job builds, the others wait by priority (equal ones in
    their order), for the builder and then for the lane."""
    started = threading.Event()
    built_order: list[int] = []
    evaluated: list[int] = []

    def build(job: Job) -> BuildResult:
        built_order.append(job.tag)
        if job.tag == 0:
            started.set()
            time.sleep(0.3)  # the others are queued meanwhile
        return BuildResult(ok=True, backend="cpp", log=job.candidate.source)

    def evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
        evaluated.append(job.tag)
        return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device)

    priorities = [0, 0, 5, 1, 5, -2]
    jobs = [
        Job(PROBLEM, Candidate(PROBLEM.key, "cpp", f"src{i}"), tag=i, priority=p)
        for i, p in enumerate(priorities)
    ]

    def fed() -> object:
        yield jobs[0]
        started.wait(5)  # the rest arrive while the first one builds
        yield from jobs[1:]

    LocalExecutor(devices=["cpu"], builders=1, slots=1).run(fed(), build, evaluate, lambda j, v: None)
    assert built_order == [0, 2, 4, 3, 1, 5]
    # the lane takes the highest built one waiting: job 0 (built first) may be overtaken by a job of
    # higher priority built before the lane came back, never by one of its own or lower priority
    assert [t for t in evaluated if t != 0] == [2, 4, 3, 1, 5]
    assert evaluated.index(0) < evaluated.index(1) < evaluated.index(5)


def test_cpu_lanes_evaluate_side_by_side_each_one_job_at_a_time() -> None:
    ex = LocalExecutor(devices=["cpu"], builders=1, cpu_lanes=3, timed=False)
    assert ex.lanes() == ["cpu", "cpu/1", "cpu/2"]
    rec = Recorder()
    results: list[int] = []
    ex.run(_jobs(30), rec.build, rec.evaluate, lambda j, v: results.append(j.tag))
    assert sorted(results) == list(range(30))
    assert set(rec.devices_used) == {"cpu", "cpu/1", "cpu/2"} and set(rec.max_active.values()) == {1}


def test_timed_cpu_lanes_never_share_a_core(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.errors import ConfigError
    from kbench.executors import lane_device, local
    from kbench.executors.local import cpu_lane_count

    monkeypatch.setattr(local, "usable_cpus", lambda: 4)
    assert cpu_lane_count(4, 1, timed=True) == 4 and cpu_lane_count(2, 2, timed=True) == 2
    assert cpu_lane_count(8, 1, timed=False) == 8  # without timing, lanes may share cores
    assert cpu_lane_count(0, 1, timed=True) == 1  # by default one timed lane: the builders share the CPU
    assert cpu_lane_count(0, 1, timed=False) == 4 and cpu_lane_count(0, 3, timed=False) == 1
    with pytest.raises(ConfigError, match=r"3 CPU lanes of 2 thread\(s\) need 6 cores .* at most 2"):
        cpu_lane_count(3, 2, timed=True)
    with pytest.raises(ConfigError, match="5 CPU lanes"):
        LocalExecutor(devices=["cpu"], builders=1, cpu_lanes=5)
    LocalExecutor(devices=["cuda:0"], builders=1, cpu_lanes=5)  # no CPU device: no CPU lanes
    assert lane_device("cpu/2") == ("cpu", 2) and lane_device("cpu") == ("cpu", 0)
    assert lane_device("cuda:1") == ("cuda:1", 0)


def test_each_cpu_lane_gets_its_own_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    from kbench.sandbox import isolate

    monkeypatch.setattr(isolate.os, "sched_getaffinity", lambda pid: {2, 3, 5, 7})
    assert [isolate.share_cores(1, lane) for lane in range(4)] == [[2], [3], [5], [7]]
    assert [isolate.share_cores(2, lane) for lane in range(2)] == [[2, 3], [5, 7]]
    assert isolate.share_cores(1, 5) == [3]  # past the cores (untimed lanes only): round again
    assert isolate.share_cores(3, 1) == [2, 3, 7]
    assert isolate.share_cores(4, 0) == [] and isolate.share_cores(0, 1) == []  # every core
