"""What the Evaluator tells its builds (api/runner.py): how many submitted jobs still wait for a builder
behind each."""

from __future__ import annotations

import threading

import pytest
from apifixtures import HONEST, PROBLEM, api_config, marked, shared_cache

from kbench.api import Evaluator, Submission
from kbench.config import RunConfig
from kbench.executors import Job
from kbench.types import BuildResult, Status


@pytest.mark.slow
def test_each_build_is_told_how_many_submitted_jobs_still_wait_for_a_builder(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The batch size a build is given decides whether builders make a precompiled header
    (evaluate/prebuild.py). The Evaluator's feed empties as jobs come (the local executor queues each for
    its builders at once), so the count is of submitted jobs not yet on a builder."""
    from kbench import pipeline

    release = threading.Event()
    batches: list[int] = []

    class Build:
        def __init__(self, cfg: RunConfig, batch: int = 1) -> None:
            batches.append(batch)

        def __call__(self, job: Job) -> BuildResult:
            release.wait(30)  # the first build holds the one builder until every job is submitted
            return BuildResult(ok=False, backend="cpp", log="no build here", status="build_error")

    monkeypatch.setattr(pipeline, "PrebuildJob", Build)
    cache = shared_cache(tmp_path_factory)
    store = tmp_path_factory.mktemp("runner-store") / "k.db"
    with Evaluator(api_config(cache, store, builders=1)) as ev:
        tickets = ev.submit_many([Submission(PROBLEM, marked(HONEST, str(i))) for i in range(5)])
        release.set()
        verdicts = [t.verdict(120) for t in tickets]
    assert [v.status for v in verdicts] == [Status.BUILD_ERROR] * 5
    # the first build may start before the rest are submitted; each later one sees those behind it
    assert batches[1:] == [4, 3, 2, 1]
