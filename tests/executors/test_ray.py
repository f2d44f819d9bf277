"""The Ray executor on a local Ray started by the test (CPU only)."""

from __future__ import annotations

import pytest

from kbench.executors import Job, get_executor
from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'kbench[ray]')")

PROBLEM = Problem(source="t", level=2, number=1, name="p", code="")


def _build(job: Job) -> BuildResult:
    return BuildResult(ok=True, backend="cpp", log=f"built {job.tag}")


def _evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
    import os

    assert built is not None
    return Verdict(
        Status.OK, job.problem.key, "cpp", "small", "fp32", device, message=f"{built.log} pid={os.getpid()}"
    )


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    import os
    import sys

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray workers cannot import a test module: ship this module's functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.init(num_cpus=2, num_gpus=0, include_dashboard=False, _temp_dir=str(tmp_path_factory.mktemp("ray")))
    yield
    ray.shutdown()


def test_ray_runs_every_job_once_on_cpu(local_ray: None) -> None:
    jobs = [Job(PROBLEM, Candidate(PROBLEM.key, "cpp", f"s{i}"), tag=i) for i in range(6)]
    got: dict[int, Verdict] = {}
    get_executor("ray").run(jobs, _build, _evaluate, lambda j, v: got.__setitem__(j.tag, v))
    assert sorted(got) == list(range(6))
    for tag, verdict in got.items():
        assert verdict.device == "cpu"
        assert verdict.message.startswith(f"built {tag} ")  # each job got its own build
    assert len({v.message.split("pid=")[1] for v in got.values()}) >= 1
