"""The Evaluator's queue over the local executor, with fake build and evaluate functions (no worker runs):
jobs flow as they come, and an executor that fails loses no job and does not stop later ones."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kbench.api import lanes as lanes_mod
from kbench.api.lanes import Lanes
from kbench.config import RunConfig
from kbench.executors import Job
from kbench.executors.local import LocalExecutor
from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

PROBLEM = Problem(source="t", level=2, number=1, name="p", code="")


@dataclass(eq=False)
class Tag:
    n: int
    ended: threading.Event = field(default_factory=threading.Event)
    outcome: Any = None

    def settle(self, outcome: Any) -> None:
        self.outcome = outcome
        self.ended.set()

    def done(self) -> bool:
        return self.ended.is_set()


def _job(n: int) -> Job:
    return Job(PROBLEM, Candidate(PROBLEM.key, "cpp", f"src{n}"), tag=Tag(n))


def _build(job: Job) -> BuildResult:
    return BuildResult(ok=True, backend="cpp", log=job.candidate.source)


def _evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
    assert built is not None and built.log == job.candidate.source  # the job's own build reached its lane
    return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device, message=job.candidate.source)


class _Runner:
    """The Runner's side the lanes use: the functions a local executor is given, and a lost job's end."""

    def __init__(self, build: Any = _build, prefetch: Any = None) -> None:
        self.build, self.prefetch = build, prefetch

    def local_fns(self) -> tuple[Any, ...]:
        return self.build, _evaluate, lambda job, verdict: job.tag.settle(verdict), self.prefetch

    def lost(self, job: Job, exc: BaseException) -> None:
        job.tag.settle(exc)


def _lanes() -> Lanes:
    return Lanes(RunConfig(device="cpu", builders=2), _Runner())  # type: ignore[arg-type]


def test_jobs_flow_through_one_executor_run_as_they_come() -> None:
    lanes = _lanes()
    first = [_job(n) for n in range(10)]
    for job in first:
        lanes.put("cpu", [job])
    assert all(job.tag.ended.wait(30) for job in first)
    later = [_job(n) for n in range(10, 20)]  # the same pump, still running, takes these
    for job in later:
        lanes.put("cpu", [job])
    assert all(job.tag.ended.wait(30) for job in later)
    assert [job.tag.outcome.message for job in first + later] == [f"src{n}" for n in range(20)]
    assert {job.tag.outcome.device for job in first + later} == {"cpu"}
    assert lanes.close(timeout=30) == []


def test_an_executor_failure_fails_its_jobs_and_later_jobs_still_run(monkeypatch: pytest.MonkeyPatch) -> None:
    runs: list[int] = []

    class Flaky:
        def run(self, jobs: Any, build: Any, evaluate: Any, on_result: Any, prefetch: Any = None) -> None:
            runs.append(1)
            if len(runs) == 1:
                next(iter(jobs))  # takes a job, then fails before it has a verdict
                raise RuntimeError("executor broke")
            LocalExecutor(devices=["cpu"], builders=1).run(jobs, build, evaluate, on_result)

    monkeypatch.setattr(lanes_mod, "get_executor", lambda name, **options: Flaky())
    lanes = _lanes()
    lost = _job(0)
    lanes.put("cpu", [lost])
    assert lost.tag.ended.wait(30)
    assert isinstance(lost.tag.outcome, RuntimeError) and "executor broke" in str(lost.tag.outcome)
    after = _job(1)
    lanes.put("cpu", [after])
    assert after.tag.ended.wait(30) and after.tag.outcome.status is Status.OK
    assert len(runs) == 2
    lanes.close(timeout=30)


def test_an_idle_gpu_lane_prefetches_for_jobs_still_building() -> None:
    """The Evaluator's prefetch reaches the executor: with one builder and builds of 0.6 s, the GPU lane
    (nothing built yet) runs ahead for the job on the builder and the one waiting next, each before its
    build is done."""
    built_at: dict[int, float] = {}
    prefetched: list[tuple[int, str, float]] = []

    def build(job: Job) -> BuildResult:
        time.sleep(0.6)
        built_at[job.tag.n] = time.monotonic()
        return _build(job)

    def prefetch(job: Job, device: str) -> None:
        prefetched.append((job.tag.n, device, time.monotonic()))

    runner = _Runner(build, prefetch)
    lanes = Lanes(RunConfig(device="cuda", builders=1), runner, devices=("cuda:0",))  # type: ignore[arg-type]
    jobs = [_job(n) for n in range(3)]
    for job in jobs:
        lanes.put("cuda", [job])
    assert all(job.tag.ended.wait(30) for job in jobs)
    lanes.close(timeout=30)
    assert [job.tag.outcome.device for job in jobs] == ["cuda:0"] * 3
    assert [n for n, _, _ in prefetched][:2] == [0, 1] and {d for _, d, _ in prefetched} == {"cuda:0"}
    assert all(when < built_at[n] for n, _, when in prefetched)
