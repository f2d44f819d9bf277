"""The Ray executor on a local Ray started by the test (CPU only)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kbench.executors import Job, get_executor
from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'kbench[ray]')")

PROBLEM = Problem(source="t", level=2, number=1, name="p", code="")


def _build(job: Job) -> BuildResult:
    import os

    return BuildResult(ok=True, backend="cpp", log=f"built {job.tag} in={os.getpid()}")


def _evaluate(job: Job, device: str, built: BuildResult | None) -> Verdict:
    import os

    assert built is not None
    return Verdict(
        Status.OK, job.problem.key, "cpp", "small", "fp32", device, message=f"{built.log} pid={os.getpid()}"
    )


# The tests of this module's cluster run on one worker: one cluster start (~8 s) serves them all.
ONE_CLUSTER = pytest.mark.xdist_group("ray-local")


@pytest.fixture(scope="module")
def local_ray(short_tmp: Path):  # type: ignore[no-untyped-def]
    import os
    import sys

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # Ray workers cannot import a test module: ship this module's functions by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # four logical CPUs: two lanes (half of them), so one job can hang while another is judged beside it
    ray.init(num_cpus=4, num_gpus=0, include_dashboard=False, _temp_dir=str(short_tmp / "ray"))
    yield
    ray.shutdown()


@ONE_CLUSTER
def test_ray_runs_every_job_once_on_cpu(local_ray: None) -> None:
    jobs = [Job(PROBLEM, Candidate(PROBLEM.key, "cpp", f"s{i}"), tag=i) for i in range(6)]
    got: dict[int, Verdict] = {}
    get_executor("ray").run(jobs, _build, _evaluate, lambda j, v: got.__setitem__(j.tag, v))
    assert sorted(got) == list(range(6))
    for tag, verdict in got.items():
        assert verdict.message.startswith(f"built {tag} ")  # each job got its own build

    # Evaluations run in the long-lived lane actors (num_cpus=4: two lanes), never in a build's process;
    # each lane on a CPU lane number of its own on this node (its workers' cores): `cpu` (0) or `cpu/N`, the
    # lowest no other process holds (lanes of other tests' clusters may hold some)
    lane_of = {v.message.split("pid=")[1]: v.device for v in got.values()}
    build_pids = {v.message.split("in=")[1].split()[0] for v in got.values()}
    assert 1 <= len(lane_of) <= 2 and not set(lane_of) & build_pids
    assert len(set(lane_of.values())) == len(lane_of)
    assert all(re.fullmatch(r"cpu(/[1-9]\d*)?", d) for d in lane_of.values()), lane_of


def _failing(job: Job, device: str, built: BuildResult | None) -> Verdict:
    raise RuntimeError(f"kbench's own failure in {job.tag}")


@ONE_CLUSTER
def test_ray_lanes_serve_later_runs_end_with_close_and_errors_reach_the_caller(local_ray: None) -> None:
    import os
    import time

    jobs = [Job(PROBLEM, Candidate(PROBLEM.key, "cpp", "s"), tag=0)]
    got: list[Verdict] = []
    executor = get_executor("ray")
    executor.run(jobs, _build, _evaluate, lambda j, v: got.append(v))
    executor.run(jobs, _build, _evaluate, lambda j, v: got.append(v))  # a later batch: the same lane
    lane_pids = {int(v.message.split("pid=")[1]) for v in got}
    assert len(got) == 2 and len(lane_pids) == 1
    [lane_pid] = lane_pids
    os.kill(lane_pid, 0)  # alive between runs
    executor.close()  # type: ignore[attr-defined]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(lane_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"lane process {lane_pid} still alive after close")
    failing = get_executor("ray")
    try:
        with pytest.raises(Exception, match="kbench's own failure in 0"):
            failing.run(jobs, _build, _failing, lambda j, v: None)
    finally:
        failing.close()  # type: ignore[attr-defined]


def test_a_cluster_started_from_a_short_lived_thread_outlives_it(short_tmp: Path) -> None:
    """Ray kills a local cluster's processes when the *thread* that started them ends: the executor starts
    it from a thread of its own, so an Evaluator's pump (a thread) ending leaves the cluster up. In a
    process of its own, with no Ray before it."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import os, threading
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        import ray
        from kbench.executors import Job, get_executor
        from kbench.types import BuildResult, Candidate, Problem, Status, Verdict

        def build(job):
            return BuildResult(ok=True, backend="cpp")

        def evaluate(job, device, built):
            return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device)

        problem = Problem(source="t", level=2, number=1, name="p", code="")
        got = []
        ex = get_executor("ray", num_cpus=2, tmp_dir={str(short_tmp / "r")!r})
        job = Job(problem, Candidate(problem.key, "cpp", "s"), tag=0)
        t = threading.Thread(target=lambda: (ex.run([job], build, evaluate, lambda j, v: got.append(v)), ex.close()))
        t.start()
        t.join()
        assert [v.status for v in got] == [Status.OK]
        print("after the thread:", ray.get(ray.remote(lambda: 41 + 1).remote(), timeout=60))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "after the thread: 42" in done.stdout, done.stderr[-3000:]


@pytest.mark.slow
@ONE_CLUSTER
def test_the_evaluator_on_ray_judges_and_files_like_the_local_one(
    local_ray: None, tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> None:
    """One engine on either executor: the Evaluator hands a batch to Ray (the build a CPU task, the
    evaluation a lane actor, each job a portable copy without its ticket), and the host files each verdict
    in the run as it does for the local executor; a resubmitted key gets its stored verdict, not a rerun."""
    from apifixtures import HONEST, PROBLEM, WRONG, api_config, shared_cache

    from kbench.api import Evaluator, Submission
    from kbench.store import Store

    cache = shared_cache(tmp_path_factory, shared_builds)
    store = tmp_path_factory.mktemp("ray-store") / "k.db"
    with Evaluator(api_config(cache, store, executor="ray")) as ev:
        tickets = ev.submit_many(
            [Submission(PROBLEM, HONEST, sample=0), Submission(PROBLEM, WRONG, sample=1)]
        )
        verdicts = [t.verdict(300) for t in tickets]
        again = ev.submit(Submission(PROBLEM, HONEST, sample=0))
        run_id = ev.run_id
    assert [v.status for v in verdicts] == [Status.OK, Status.MISMATCH], [v.message for v in verdicts]
    assert again.stored and again.verdict() == verdicts[0]
    assert all(v.build is not None and v.build.ok for v in verdicts)  # built ahead, by a Ray task
    with Store(store) as db:
        filed = dict(db.verdicts(run_id))
    assert {(k.sample, v.status) for k, v in filed.items()} == {(0, Status.OK), (1, Status.MISMATCH)}


def _held(job: Job, device: str, built: BuildResult | None) -> Verdict:
    """Job "held" runs until its file `release` exists (a candidate that hangs); any other at once."""
    import time

    if job.tag[0] == "held":
        release = Path(job.tag[1]) / "release"
        deadline = time.monotonic() + 120
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    return Verdict(Status.OK, job.problem.key, "cpp", "small", "fp32", device, message=job.tag[0])


@ONE_CLUSTER
def test_a_job_that_comes_later_is_judged_while_an_earlier_one_hangs(local_ray: None, tmp_path: Path) -> None:
    """A run takes an open feed as it comes (an Evaluator's): a job put in while another hangs goes to a
    free lane at once and its verdict comes back while the first still runs; the run ends once the feed
    is closed and every job it took has its verdict."""
    import queue
    import threading
    import time

    feed: queue.Queue[Job | None] = queue.Queue()

    def stream():  # type: ignore[no-untyped-def]
        while (job := feed.get()) is not None:
            yield job

    got: queue.Queue[str] = queue.Queue()
    executor = get_executor("ray")
    runner = threading.Thread(
        target=executor.run, args=(stream(), _build, _held, lambda j, v: got.put(v.message)), daemon=True
    )
    runner.start()
    try:
        feed.put(Job(PROBLEM, Candidate(PROBLEM.key, "cpp", "a"), tag=("held", str(tmp_path))))
        time.sleep(1.0)  # the first job is on its lane by now (or soon): the second comes after it
        feed.put(Job(PROBLEM, Candidate(PROBLEM.key, "cpp", "b"), tag=("later", str(tmp_path))))
        assert got.get(timeout=60) == "later"  # while "held" still runs
        (tmp_path / "release").touch()
        assert got.get(timeout=60) == "held"
        feed.put(None)  # the feed closes: the run ends
        runner.join(timeout=30)
        assert not runner.is_alive()
    finally:
        (tmp_path / "release").touch()
        feed.put(None)
        executor.close()  # type: ignore[attr-defined]
