"""The executor contract: jobs in, verdicts out through a callback, in any order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kbench.types import BuildResult, Candidate, Problem, Verdict


@dataclass(frozen=True)
class Job:
    problem: Problem
    candidate: Candidate
    tag: Any = field(default=None, compare=False)  # the caller's key for the result (e.g. a store key)
    # higher first: among the jobs waiting for a builder, and among the built ones waiting for a lane
    # (executors/local.py); equal priorities keep their order
    priority: int = field(default=0, compare=False)


# build(job) -> BuildResult or None (nothing to prebuild); runs on a CPU builder, no GPU visible.
BuildFn = Callable[[Job], BuildResult | None]
# evaluate(job, device, build) -> Verdict; runs on one device lane, one job at a time per lane. A CPU
# device's lanes past the first are named `cpu/N` (lane_device): their workers run on the lane's own cores.
EvalFn = Callable[[Job, str, BuildResult | None], Verdict]
ResultFn = Callable[[Job, Verdict], None]
# prefetch(job, device): what the job's evaluation on `device` needs that needs no build (its reference
# run), done by a GPU lane with nothing built to evaluate while the job's build runs. Best effort: the
# evaluation does whatever a prefetch did not. What it returns (a report of the run) is the caller's.
PrefetchFn = Callable[[Job, str], object]


class Executor(Protocol):
    def run(
        self,
        jobs: Iterable[Job],
        build: BuildFn,
        evaluate: EvalFn,
        on_result: ResultFn,
        prefetch: PrefetchFn | None = None,
    ) -> None:
        """Run every job; call on_result once per job (from the calling thread or a lock-held section).
        An executor that keeps something between its runs (Ray's lane actors) also has `close()`, which
        its owner calls once it runs no more (api/lanes.py)."""
        ...


def lane_device(lane: str) -> tuple[str, int]:
    """A lane's device and CPU lane number: `cpu/2` -> ("cpu", 2), `cuda:0` -> ("cuda:0", 0)."""
    device, _, number = lane.partition("/")
    return device, int(number or 0)
