"""What the service hands out of a verdict (serve/wire.py): no path of its machine, no build command line,
whatever field holds them; the typed verdict a client rebuilds from it."""

from __future__ import annotations

from kbench.api import Submission, Ticket
from kbench.problems import get_problem
from kbench.serve.wire import JobView, SubmitRequest, served
from kbench.store import VerdictKey
from kbench.types import BuildResult, Candidate, Status, Verdict

LOG = """[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=ext -isystem /srv/venv/include -c /srv/cache/builds/ab/main.cpp -o main.o
FAILED: main.o
/usr/bin/c++ -MMD -MF main.o.d -fPIC -c /srv/cache/builds/ab/main.cpp -o main.o
/srv/cache/builds/ab/main.cpp:12:5: error: expected ';' before 'return'
   12 |     return x
ninja: build stopped: subcommand failed."""


def _verdict() -> Verdict:
    build = BuildResult(False, "cpp", log=LOG, status="build_error", message="the build failed")
    return Verdict(
        Status.BUILD_ERROR, "kbench:2/1", "cpp", "small", "fp32", "cpu",
        message="build failed:\n" + LOG, log_tail="Traceback: File \"/srv/cache/jobs/7/run/candidate.py\", line 3",
        build=build, warnings=("outputs went through files: /srv/cache/jobs/7/out_1.pt",),
    )  # fmt: skip


def test_a_served_verdict_keeps_the_diagnostics_and_drops_paths_and_commands() -> None:
    out = served({"message": LOG, "n": 3, "key": "kbench:2/1", "list": ["at /home/u/x.py line 3"]})
    assert out["message"].splitlines() == [
        "main.cpp:12:5: error: expected ';' before 'return'",
        "   12 |     return x",
        "ninja: build stopped: subcommand failed.",
    ]
    assert (out["n"], out["key"], out["list"]) == (3, "kbench:2/1", ["at x.py line 3"])


def test_a_job_view_serves_its_verdict_cleaned_and_the_client_reads_it_back() -> None:
    problem = get_problem("2/1")
    ticket = Ticket(
        VerdictKey(problem.key, 0, 0, "cpp", "api"), problem, Candidate(problem.key, "cpp", "x"),
        Submission(problem, "x"), "cpu",
    )  # fmt: skip
    ticket.finish(_verdict())
    view = JobView.of(ticket, "run-1")
    text = view.model_dump_json()
    assert "/srv/" not in text and "-isystem" not in text and "FAILED:" not in text
    verdict = view.typed_verdict()
    assert verdict is not None and verdict.status is Status.BUILD_ERROR
    assert "main.cpp:12:5: error" in verdict.message and "main.cpp:12:5" in verdict.build.log
    assert verdict.log_tail.endswith('"candidate.py", line 3') and verdict.warnings == (
        "outputs went through files: out_1.pt",
    )


def test_an_id_of_another_run_is_answered_with_where_its_verdict_is(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import pytest
    from fastapi.exceptions import HTTPException

    from kbench.serve.jobs import ServiceJobs
    from kbench.store import Store
    from kbench.store.journal import Journal

    with Store(tmp_path / "k.db") as store:
        old = store.start_run({}, {}, "old-run")
        new = store.start_run({}, {}, "new-run")
        journal = Journal(store)
        journal.accept(old, "job-1", VerdictKey("kbench:2/1", 0, 0, "cpp", "m"), "src", "", "client-1")
        assert journal.by_idempotency_key(old, "client-1").id == "job-1"  # type: ignore[union-attr]
        assert journal.by_idempotency_key(new, "client-1") is None  # keys are per run
        assert [e.id for e in journal.open_jobs(old)] == ["job-1"] and journal.open_jobs(new) == []
        evaluator = type("E", (), {"run_id": new})()
        jobs = ServiceJobs(evaluator, 10, journal)  # type: ignore[arg-type]
        with pytest.raises(HTTPException) as caught:
            jobs.get("job-1")
        assert caught.value.status_code == 404 and "belongs to run old-run" in str(caught.value.detail)
        assert "--run old-run" in str(caught.value.detail)
        with pytest.raises(HTTPException, match="no job 'job-2'"):
            jobs.get("job-2")
        journal.accept(new, "job-3", VerdictKey("kbench:2/1", 1, 0, "cpp", "m"), "src", "", "client-3")
        other = SubmitRequest(problem="2/1", source="another candidate", idempotency_key="client-3")
        with pytest.raises(
            HTTPException
        ) as caught:  # a key reused for another candidate: refused, not judged
            jobs.submit(other, other.idempotency_key)
        assert caught.value.status_code == 409 and "named another submission (job job-3)" in str(
            caught.value.detail
        )
        journal.end("job-1")
        assert journal.open_jobs(old) == [] and journal.find("job-1").ended  # type: ignore[union-attr]
        # a job's priority and timeout are kept with it, and a restarted service queues it so again
        journal.accept(new, "job-4", VerdictKey("kbench:2/1", 2, 0, "cpp", "m"), "src", "", None, 7, 2.5)
        kept = journal.find("job-4")
        assert kept is not None and (kept.priority, kept.timeout_s) == (7, 2.5)
        assert journal.find("job-3").priority == 0 and journal.find("job-3").timeout_s is None  # type: ignore[union-attr]
        submitted: list[Submission] = []

        class Recording:
            run_id = new

            def submit(self, sub: Submission) -> Ticket:
                submitted.append(sub)
                problem = get_problem("2/1")
                key = VerdictKey(problem.key, 2, 0, "cpp", "m")
                return Ticket(key, problem, Candidate(problem.key, "cpp", "src"), sub, "cpu")

        jobs.evaluator = Recording()  # type: ignore[assignment]
        jobs.get("job-4")
        assert (submitted[-1].priority, submitted[-1].timeout_s, submitted[-1].sample) == (7, 2.5, 2)
