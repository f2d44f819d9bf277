"""What the Evaluator gives its executor besides builds and evaluations (api/runner.py): a GPU lane with
nothing built to evaluate runs a job's reference into the shared pool ahead of it (once per problem and
device), and each build is told how many submitted jobs still wait for a builder behind it."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from apifixtures import HONEST, PROBLEM, api_config, marked, shared_cache

from kbench.api import Evaluator, Submission
from kbench.api.jobs import Ticket
from kbench.api.runner import Runner, Stages
from kbench.config import RunConfig
from kbench.evaluate import shared_reference
from kbench.evaluate.reference_pool import ReferencePool
from kbench.executors import Job
from kbench.problems import get_problem
from kbench.store import VerdictKey
from kbench.types import BuildResult, Candidate, Status


class _Session:
    """The one thing of a Session the prefetch reads: the problem's stored baselines (none)."""

    def baselines(self, problem: Any) -> dict[str, Any]:
        return {}


def _job(address: str, source: str = "x") -> Job:
    problem = get_problem(address)
    candidate = Candidate(problem.key, "cuda", source)
    key = VerdictKey(problem.key, 0, 0, "cuda", "api")
    ticket = Ticket(key, problem, candidate, Submission(problem, source), "cuda")
    return Job(problem, candidate, tag=ticket)


def test_a_lane_runs_a_building_jobs_reference_into_the_pool_once_per_problem_and_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[tuple[str, str, str, object]] = []

    def run(p, cfg, plan, reused, refs, workdir):  # type: ignore[no-untyped-def]
        runs.append((p.key, cfg.device, cfg.backend, refs))
        return plan, SimpleNamespace(phases={"wall": 1.0})

    # the reference run itself: prefetch_reference decides whether it runs
    monkeypatch.setattr(shared_reference, "pooled_reference", run)
    cfg = RunConfig(device="cuda", preset="small", cache_dir=tmp_path / "cache")
    pool = ReferencePool(max_bytes=100)
    runner = Runner(Stages(cfg, pool), _Session(), lambda: 0)  # type: ignore[arg-type]
    a, b = _job("2/1", "a"), _job("2/1", "b")
    runner.prefetch(a, "cuda:0")
    runner.prefetch(b, "cuda:0")  # another candidate of the problem on that device: the pool has it
    runner.prefetch(b, "cuda:1")  # the reference's outputs belong to a device: run there too
    key = a.problem.key
    assert runs == [(key, "cuda:0", "cuda", pool), (key, "cuda:1", "cuda", pool)]
    ended = _job("2/2")
    assert ended.tag.future.cancel()
    runner.prefetch(ended, "cuda:0")  # cancelled meanwhile: nothing to run ahead for
    monkeypatch.setattr(pool, "held_bytes", lambda: 51)
    runner.prefetch(_job("2/3"), "cuda:0")  # a pool half full: it could evict the run before its use
    assert len(runs) == 2 and ("kbench:2/3", "cuda:0") not in runner.stages.prefetched
    alone = Runner(Stages(cfg, None), _Session(), lambda: 0)  # type: ignore[arg-type]
    alone.prefetch(_job("2/4"), "cuda:0")  # no shared pool: each evaluation runs its own reference
    assert len(runs) == 2


@pytest.mark.slow
def test_each_build_is_told_how_many_submitted_jobs_still_wait_for_a_builder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, session_cache: Path
) -> None:
    """The batch size a build is given decides whether builders make a precompiled header
    (evaluate/prebuild.py). The Evaluator's feed empties as jobs come (the local executor queues each for
    its builders at once), so the count is of submitted jobs not yet on a builder."""
    from kbench.evaluate import prebuild

    release = threading.Event()
    batches: list[int] = []

    def build(candidate: Candidate, cfg: RunConfig, device: str, batch: int = 1) -> BuildResult:
        batches.append(batch)
        release.wait(30)  # the first build holds the one builder until every job is submitted
        return BuildResult(ok=False, backend="cpp", log="no build here", status="build_error")

    monkeypatch.setattr(prebuild, "prebuild", build)
    cache = shared_cache(tmp_path_factory, session_cache / "builds")  # builds nothing: no seed needed
    store = tmp_path_factory.mktemp("runner-store") / "k.db"
    with Evaluator(api_config(cache, store, builders=1)) as ev:
        tickets = ev.submit_many([Submission(PROBLEM, marked(HONEST, str(i))) for i in range(5)])
        release.set()
        verdicts = [t.verdict(120) for t in tickets]
    assert [v.status for v in verdicts] == [Status.BUILD_ERROR] * 5
    # the first build may start before the rest are submitted; each later one sees those behind it
    assert batches[1:] == [4, 3, 2, 1]
