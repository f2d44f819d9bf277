"""The Ray executor's GPU scheduling on a CPU machine: a local Ray told it has two GPUs (logical ones).

Ray hands each GPU lane actor its own `CUDA_VISIBLE_DEVICES`; the lanes here skip the check that torch
sees a GPU, and the jobs report what their process was shown.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kbench.executors import Job, get_executor
from kbench.executors.ray_executor import Lane, RayExecutor
from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'kbench[ray]')")

PROBLEM = Problem(source="t", level=2, number=1, name="p", code="")


class FakeGpuLane(Lane):
    def __init__(self, gpu: bool) -> None:  # no real GPU behind the logical ones
        self.gpu = gpu


def _build(job: Job) -> BuildResult:
    import os

    return BuildResult(ok=True, backend="cuda", log=f"built={os.getpid()}")


def _evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
    import os

    seen = f"cvd={os.environ.get('CUDA_VISIBLE_DEVICES')} pid={os.getpid()}"
    assert built is not None
    return Verdict(Status.OK, job.problem.key, "cuda", "full", "fp32", device, message=f"{seen} {built.log}")


@pytest.fixture(scope="module")
def two_gpu_ray(short_tmp: Path):  # type: ignore[no-untyped-def]
    import os
    import sys

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, _temp_dir=str(short_tmp / "ray"))
    yield
    ray.shutdown()


def test_one_lane_per_gpu_each_with_its_own_device(
    two_gpu_ray: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(RayExecutor, "lane_class", FakeGpuLane)
    jobs = [Job(PROBLEM, Candidate(PROBLEM.key, "cuda", f"s{i}"), tag=i) for i in range(8)]
    got: dict[int, Verdict] = {}
    get_executor("ray", slots=2).run(jobs, _build, _evaluate, lambda j, v: got.__setitem__(j.tag, v))
    assert sorted(got) == list(range(8))
    assert {v.device for v in got.values()} == {"cuda"}
    fields = [dict(kv.split("=", 1) for kv in v.message.split()) for v in got.values()]
    # two lane processes, one per logical GPU, each shown only its own
    by_pid = {f["pid"]: f["cvd"] for f in fields}
    assert sorted(by_pid.values()) == ["0", "1"]
    # evaluations never ran in a build's process
    assert not set(by_pid) & {f["built"] for f in fields}
