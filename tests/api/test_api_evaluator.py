"""The library API on the CPU: sync, async and batch verdicts, warm reuse, the run in the store, resubmitted
keys, errors at submission, closing. The cpp fixtures share one extension, built once per session; the
tests share one Evaluator, which the last test closes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import pytest
from apifixtures import HONEST, PROBLEM, WRONG, api_config, digest, marked, owned_processes, shared_cache
from typer.testing import CliRunner

from kbench.api import Evaluator, EvaluatorClosed, JobState, KeyConflict, Submission
from kbench.backends import backend_names
from kbench.cli import app
from kbench.entries import STARTER
from kbench.errors import ConfigError, ProblemError
from kbench.store import Store, VerdictKey
from kbench.types import Status

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Path:
    return shared_cache(tmp_path_factory, shared_builds)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("api-store") / "k.db"


@pytest.fixture(scope="module")
def ev(cache: Path, store: Path) -> Iterator[Evaluator]:
    evaluator = Evaluator(api_config(cache, store))
    yield evaluator
    evaluator.close()


def test_sync_async_and_batch_verdicts_land_in_one_run(ev: Evaluator, store: Path, tmp_path: Path) -> None:
    first = ev.evaluate("2/1", HONEST)
    second = asyncio.run(ev.aevaluate("2/1", WRONG))
    batch = [marked(HONEST, "b0"), marked(WRONG, "b1"), marked(HONEST, "b2")]
    many = ev.evaluate_many([Submission(PROBLEM, src) for src in batch])
    assert (first.status, second.status) == (Status.OK, Status.MISMATCH), first.message + first.log_tail
    assert [v.status for v in many] == [Status.OK, Status.MISMATCH, Status.OK]
    assert [v.candidate_digest for v in many] == [digest(s) for s in batch]  # in the order given
    stats = ev.stats()
    assert stats.finished == 5 and stats.pending == 0 and stats.failed == 0
    # warm: one reference run for the problem, later verdicts show no reference worker of their own
    assert stats.reference_runs == 1 and stats.reference_reuses == 4
    assert any(k.startswith("ref:") for k, _ in first.phases)
    assert not any(k.startswith("ref:") for v in many for k, _ in v.phases)
    assert all(v.build is not None and v.build.cache_hit for v in many)
    with Store(store) as db:  # filed as verdicts come: two lanes may end them out of order
        records = sorted(db.records(ev.run_id or ""), key=lambda r: r.key.sample)
        config = db.run(ev.run_id or "").config
    assert [r.key for r in records] == [VerdictKey(PROBLEM, s, 0, "cpp", "api") for s in range(5)]
    statuses = [r.verdict.status for r in records]
    assert statuses == [Status.OK, Status.MISMATCH, Status.OK, Status.MISMATCH, Status.OK]
    assert records[2].candidate_source == batch[0] and config["preset"] == "small"
    html = tmp_path / "r.html"
    report = CliRunner().invoke(app, ["report", ev.run_id or "", "--store", str(store), "--out", str(html)])
    assert report.exit_code == 0, report.output
    assert "verdicts" in report.output and html.exists()


def test_a_callers_own_start_and_the_wait_before_evaluating_are_phase_cli(ev: Evaluator) -> None:
    """kbench eval passes its process's age: the verdict's phases then cover the command's whole time, the
    Evaluator's set-up between the Submission and its evaluation included (it imported torch there)."""
    counted = Submission(PROBLEM, marked(HONEST, "cli-1"), before_s=0.5)
    time.sleep(1.0)  # set-up between making the submission and evaluating it
    phases = dict(ev.submit(counted).verdict().phases)
    assert phases["cli"] >= 1.5
    plain = Submission(PROBLEM, marked(HONEST, "cli-2"))
    time.sleep(0.2)
    assert "cli" not in dict(ev.submit(plain).verdict().phases)  # API callers count nothing of their own


def test_a_resubmitted_key_gets_its_stored_verdict_and_a_run_continues(
    ev: Evaluator, cache: Path, store: Path
) -> None:
    filed = ev.evaluate("2/1", HONEST, sample=7)
    before = ev.stats().finished
    again = ev.submit(Submission("2/1", HONEST, sample=7))
    assert again.stored and again.verdict() == filed and ev.stats().finished == before  # not judged again
    with pytest.raises(KeyConflict, match="sample 7 turn 0"):
        ev.submit(Submission("2/1", WRONG, sample=7))
    with Evaluator(api_config(cache, store, run_id=ev.run_id)) as resumed:  # another process, later
        assert resumed.run_id == ev.run_id
        assert resumed.submit(Submission("2/1", HONEST, sample=7)).stored
        assert resumed.next_sample("2/1") == 8  # automatic samples continue after the stored ones
        turn = resumed.evaluate("2/1", WRONG, sample=7, turn=1)
    assert turn.status is Status.MISMATCH
    with Store(store) as db:
        keys = [k for k, _ in db.verdicts(ev.run_id or "") if k.sample == 7]
    assert keys == [VerdictKey(PROBLEM, 7, 0, "cpp", "api"), VerdictKey(PROBLEM, 7, 1, "cpp", "api")]


def test_our_misconfiguration_raises_at_submission(ev: Evaluator, cache: Path, tmp_path: Path) -> None:
    with pytest.raises(ProblemError, match="no problem 9/999"):
        ev.submit(Submission("9/999", HONEST))
    with pytest.raises(
        ConfigError, match=f"unknown backend 'fortran'; choose one of: {', '.join(backend_names())}"
    ):
        ev.submit(Submission("2/1", HONEST, backend="fortran"))
    with pytest.raises(ConfigError, match="cuda backend needs a CUDA device"):
        ev.submit(Submission("2/1", HONEST, backend="cuda"))
    with pytest.raises(ConfigError, match="unknown executor 'slurm'; choose one of: local, ray"):
        Evaluator(api_config(cache, tmp_path / "k.db"), executor="slurm")
    with pytest.raises(ConfigError, match="bad config value for 'timeout_s'"):
        Evaluator(api_config(cache, tmp_path / "k.db"), timeout_s="soon")
    # a preset the problem lacks runs at its file's sizes (problems/loader.py); a mistyped one is refused
    with Evaluator(api_config(cache, tmp_path / "k.db", preset="smal")) as typo:
        with pytest.raises(ProblemError, match="did you mean 'small'"):
            typo.submit(Submission("2/1", HONEST))
    assert typo.closed
    with pytest.raises(EvaluatorClosed):
        typo.evaluate("2/1", HONEST)


def test_a_request_timeout_shortens_only_its_own_phases(ev: Evaluator) -> None:
    """`timeout_s` bounds each of this candidate's phases (here its correctness calls, which spin
    forever), under the Evaluator's own 120 s; the next submission keeps the full budgets."""
    from evalfixtures import fixture_source

    t0 = time.monotonic()
    hung = ev.evaluate_many([Submission(PROBLEM, fixture_source("py_hang.py"), timeout_s=3.0)])[0]
    assert hung.status is Status.TIMEOUT and "3 s" in hung.message, hung.message
    assert time.monotonic() - t0 < 60
    assert ev.evaluate("2/1", marked(HONEST, "after the timeout")).status is Status.OK
    with pytest.raises(ConfigError, match="priority 5000 is out of range"):
        Submission(PROBLEM, HONEST, priority=5000)
    with pytest.raises(ConfigError, match="timeout_s 0 must be a positive"):
        Submission(PROBLEM, HONEST, timeout_s=0)


def test_close_cancels_queued_jobs_and_ends_every_worker(ev: Evaluator, cache: Path, store: Path) -> None:
    assert owned_processes() != []  # the warm starter
    filed_before = len(Store(store).verdicts(ev.run_id or ""))
    tickets = ev.submit_many([Submission("2/1", marked(HONEST, str(i))) for i in range(6)])
    ev.close()  # the running job finishes; the ones still queued are cancelled
    # a caller waiting on the futures hears of the cancelled ones too (they never reach a lane)
    done, pending = futures.wait([t.future for t in tickets], timeout=5)
    assert not pending and len(done) == len(tickets)
    states = [t.state for t in tickets]
    assert set(states) <= {JobState.DONE, JobState.CANCELLED} and JobState.CANCELLED in states
    assert all(t.verdict().status is Status.OK for t in tickets if t.state is JobState.DONE)
    with Store(store) as db:
        filed = len(db.verdicts(ev.run_id or ""))
    assert filed == filed_before + states.count(JobState.DONE)  # every verdict delivered was filed
    # the last Evaluator closed: no worker is left; the idle warm starter stays for the next Evaluator
    starters = _until(lambda: all(STARTER in p for p in owned_processes()))
    assert starters != []
    with Evaluator(api_config(cache, store)) as again:
        assert again.evaluate(PROBLEM, marked(HONEST, "again")).status is Status.OK
        assert set(starters) <= set(owned_processes())  # forked from the starter kept: no torch import
        again.close(cancel=True)  # ends the starters too
    assert _until(lambda: owned_processes() == []) == []


def _until(done: Callable[[], bool], wait_s: float = 10.0) -> list[str]:
    """The process's own processes once `done` holds (or after `wait_s`)."""
    deadline = time.monotonic() + wait_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)
    return owned_processes()


def test_a_stored_problem_file_key_resolves_in_the_configs_own_source(tmp_path: Path) -> None:
    """What a restarted service requeues: a job's problem by its stored key (name and content digest), found
    among the config's source, a file or a folder, wherever that lies now; never outside it."""
    from kbench.problems import get_problem

    folder = tmp_path / "problems"
    folder.mkdir()
    path = folder / "7_Linear_ReLU.py"
    path.write_text(get_problem("2/1").code)
    key = get_problem(str(path)).key
    assert key.startswith("file:") and str(tmp_path) not in key
    for source in (str(path), str(folder)):
        with Evaluator(api_config(tmp_path / "cache", tmp_path / "k.db", source=source)) as ev:
            problem = ev.problem(key)
            assert problem.key == key and problem.path == str(path)
    with Evaluator(api_config(tmp_path / "cache", tmp_path / "k.db")) as ev:  # the suite: not there
        with pytest.raises(ProblemError, match="give the file's path"):
            ev.problem(key)


def test_a_cancelled_job_wakes_whoever_waits_on_its_future() -> None:
    """`concurrent.futures.wait` and `as_completed` return a job cancelled while queued at once, not when
    a lane would have reached it; the lane's later take of it is refused quietly."""
    from kbench.api.jobs import TicketFuture

    waiting, running = TicketFuture(), TicketFuture()
    assert running.set_running_or_notify_cancel() and not running.cancel()
    assert waiting.cancel() and waiting.cancel()  # cancelling twice is no error
    done, _ = futures.wait([waiting], timeout=1)
    assert done == {waiting}
    assert list(futures.as_completed([waiting], timeout=1)) == [waiting]
    assert waiting.set_running_or_notify_cancel() is False  # the lane that reaches it runs nothing
    running.set_result(None)  # type: ignore[arg-type]
    assert set(futures.as_completed([running, waiting], timeout=1)) == {running, waiting}
