"""`kbench serve` started here on 127.0.0.1 (a real process, a real socket): 32 evaluations from 8
concurrent clients, none lost, duplicated or mixed up; every bad request refused with a one-line 4xx; the
queue cap; the bind rules; and a stopped service leaves no process behind."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from apifixtures import HONEST, PROBLEM, WRONG, digest, marked, shared_cache

from kbench.client import Client, ServiceError
from kbench.errors import ConfigError
from kbench.sandbox import procs
from kbench.serve import check_bind, read_token
from kbench.store import Store
from kbench.store.journal import Journal
from kbench.types import Status

pytestmark = pytest.mark.slow
# The tests of the module's service run on one worker: one service start (~8 s) serves them all.
ONE_SERVICE = pytest.mark.xdist_group("serve-service")
TOKEN = "kbench-test-token-0123456789"
MAX_QUEUE = 12  # the 8 clients never have more than 8 jobs pending; the burst test goes past it
MAX_BODY = 256 << 10


@dataclass
class Service:
    url: str
    proc: subprocess.Popen[str]
    store: Path

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])


def _kbench(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-c", "from kbench.cli import main; main()", *args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Iterator[Service]:
    store = tmp_path_factory.mktemp("serve") / "kbench.db"
    env = {
        **os.environ,
        "KBENCH_CACHE_DIR": str(shared_cache(tmp_path_factory, shared_builds)),
        "KBENCH_SERVE_TOKEN": TOKEN,
    }
    args = ["serve", "--port", "0", "--store", str(store), "--device", "cpu", "--backend", "cpp", "--preset",
            "small", "--no-timing", "--max-queue", str(MAX_QUEUE), "--max-body-mib", str(MAX_BODY / 2**20)]  # fmt: skip
    proc = _kbench(args, env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # "kbench serve: http://127.0.0.1:PORT (run ...)" once it listens
    assert line.startswith("kbench serve: http://127.0.0.1:"), line + proc.communicate(timeout=60)[1]
    service = Service(line.split()[2], proc, store)
    yield service
    owner = procs.ProcRef.of(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    left = [pid for pid in procs.all_pids() if procs.owner_of(pid) == owner and pid != proc.pid]
    assert not [pid for pid in left if (info := procs.info_of(pid)) is not None and info.alive]


def _raw(
    service: Service, method: str, path: str, body: bytes | None, headers: dict[str, str]
) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
    try:
        conn.request(method, "/v1" + path, body, headers)
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    finally:
        conn.close()


JOBS = 32  # a load test's size lives in benchmarks/service_latency.py; this one checks nothing is lost


@ONE_SERVICE
def test_thirty_two_evaluations_from_eight_clients(service: Service) -> None:
    results: dict[str, tuple[str, str, Status]] = {}  # job id -> (source, verdict digest, status)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        with Client(service.url, token=TOKEN) as c:
            for i in range(n, JOBS, 8):  # 4 jobs from each client, 32 in all
                source = marked(HONEST if i % 3 else WRONG, f"client {n} job {i}")
                try:
                    job = c.submit("2/1", source, model="load-test")
                    verdict = c.wait(job.id).typed_verdict()
                    assert verdict is not None, job
                except BaseException as exc:
                    errors.append(exc)
                    return
                with lock:
                    assert job.id not in results
                    results[job.id] = (source, verdict.candidate_digest, verdict.status)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[0]
    assert len(results) == JOBS  # none lost
    for source, got, status in results.values():  # none mixed up: each verdict is its own source's
        assert got == digest(source)
        assert status is (Status.OK if "# client" in source and HONEST in source else Status.MISMATCH)
    with Client(service.url, token=TOKEN) as c:
        health = c.health()
    assert health.queue.pending == 0 and health.queue.failed == 0
    with Store(service.store) as db:
        records = [r for r in db.records(health.run_id or "") if r.key.model == "load-test"]
    assert len(records) == JOBS and len({r.key for r in records}) == JOBS  # none duplicated
    assert sorted(r.key.sample for r in records) == list(range(JOBS))
    assert {r.candidate_source for r in records} == {source for source, _, _ in results.values()}
    assert all(r.verdict.candidate_digest == digest(r.candidate_source) for r in records)


@ONE_SERVICE
def test_bad_requests_are_refused_with_one_line(service: Service) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    good = json.dumps({"problem": "2/1", "source": HONEST}).encode()
    cases = [
        (good, {"Content-Type": "application/json"}, 401, "bearer token"),
        (good, {**auth, "Authorization": "Bearer not-the-token-at-all"}, 401, "bearer token"),
        (b'{"problem": "2/1", "source": ', auth, 400, "not valid JSON"),
        (b"x" * (MAX_BODY + 1), auth, 413, f"limit of {MAX_BODY} bytes"),
        (json.dumps({"problem": "2/1"}).encode(), auth, 422, "field 'source': Field required"),
        (json.dumps({"problem": "2/1", "source": "x", "turn": -1}).encode(), auth, 422, "field 'turn'"),
        (
            json.dumps({"problem": "2/1", "source": "x", "priority": 10**6}).encode(),
            auth,
            422,
            "field 'priority'",
        ),
        (
            json.dumps({"problem": "2/1", "source": "x", "timeout_s": 0}).encode(),
            auth,
            422,
            "field 'timeout_s'",
        ),
        # a sample past what the store keeps is refused, and numbers nothing after it
        (
            json.dumps({"problem": "2/1", "source": "x", "sample": 10**30}).encode(),
            auth,
            422,
            "field 'sample'",
        ),
        (good, {"Authorization": f"Bearer {TOKEN}", "Content-Type": "text/plain"}, 415, "Content-Type"),
        (json.dumps({"problem": "/etc:1/1", "source": "x"}).encode(), auth, 400, "of source 'kbench' only"),
        (json.dumps({"problem": "9/999", "source": "x"}).encode(), auth, 400, "no problem 9/999"),
        # A problem's code is trusted: no file, folder or `..` of the service's machine names one.
        (
            json.dumps({"problem": "/tmp/evil.py", "source": "x"}).encode(),
            auth,
            400,
            "a path is not a problem",
        ),
        (
            json.dumps({"problem": "kbench:../x", "source": "x"}).encode(),
            auth,
            400,
            "a path is not a problem",
        ),
        (json.dumps({"problem": "..", "source": "x"}).encode(), auth, 400, "a path is not a problem"),
        (json.dumps({"problem": "evil.py", "source": "x"}).encode(), auth, 400, "a path is not a problem"),
        (json.dumps({"problem": "hf:1/1", "source": "x"}).encode(), auth, 400, "of source 'kbench' only"),
        (json.dumps({"problem": "2/1", "source": "x", "backend": "cuda"}).encode(), auth, 400, "CUDA device"),
    ]
    for body, headers, status, words in cases:
        got, answer = _raw(service, "POST", "/jobs", body, headers)
        assert (got, words in answer.get("detail", "")) == (status, True), (status, words, answer)
        assert "\n" not in answer["detail"]
    assert _raw(service, "GET", "/health", None, {})[0] == 401
    got, answer = _raw(service, "GET", "/jobs/nope", None, auth)
    assert got == 404 and "no job 'nope'" in answer["detail"]
    with (
        Client(service.url, token="wrong-token-but-long-enough") as c,
        pytest.raises(ServiceError) as refused,
    ):
        c.problems()
    assert refused.value.status == 401


# An honest candidate whose construction takes 2 s: the burst below fills the queue however quickly the
# service turns verdicts around (cached builds, forked workers: well under a second each otherwise, so a
# slow burst on a loaded host could be outpaced by its one CPU lane and never see a 429).
SLOW_HONEST = HONEST + (
    "\nimport time\n\n\nclass ModelNew(ModelNew):\n"
    "    def __init__(self, *args):\n        time.sleep(2.0)\n        super().__init__(*args)\n"
)


@ONE_SERVICE
def test_a_full_queue_answers_429_and_keeps_what_it_took(service: Service) -> None:
    with Client(service.url, token=TOKEN) as c:
        taken, refused = [], []
        for i in range(MAX_QUEUE + 4):
            try:
                taken.append(c.submit(PROBLEM, marked(SLOW_HONEST, f"burst {i}"), model="burst"))
            except ServiceError as exc:
                refused.append(exc)
        assert refused and all(e.status == 429 and "queue is full" in e.detail for e in refused)
        done = [c.wait(job.id) for job in taken]
    assert all(job.typed_verdict() is not None and job.typed_verdict().ok for job in done)  # type: ignore[union-attr]


@ONE_SERVICE
def test_problems_health_and_resubmission(service: Service) -> None:
    with Client(service.url, token=TOKEN) as c:
        softmax = c.problems(level=2, tag="softmax")
        health = c.health()
        first = c.wait(c.submit("2/1", HONEST, sample=500, model="resubmit").id)
        again = c.submit("2/1", HONEST, sample=500, model="resubmit")
        with pytest.raises(ServiceError) as conflict:
            c.submit("2/1", WRONG, sample=500, model="resubmit")
        verdict = c.verdict(first.id)
    assert softmax and all("softmax" in p.tags and p.level == 2 for p in softmax)
    assert (health.status, health.device, health.backend, health.preset, health.measure) == (
        "ok", "cpu", "cpp", "small", False,
    )  # fmt: skip
    assert again.stored and again.verdict == first.verdict and verdict.status is Status.OK
    assert conflict.value.status == 409 and "holds another candidate" in conflict.value.detail
    # the next turn a remote trainer would send: the RL environment's own feedback, served beside the verdict
    from kbench.prompts import refine_message

    assert first.feedback == refine_message("cpp", verdict) and "The answer is correct" in first.feedback


@ONE_SERVICE
def test_a_batch_admits_each_item_alone_and_a_queued_job_can_be_cancelled(service: Service) -> None:
    with Client(service.url, token=TOKEN) as c:
        items = c.submit_many([
            {"problem": "2/1", "source": marked(HONEST, "batch 1"), "model": "batch-test"},
            {"problem": "/etc/passwd", "source": HONEST, "model": "batch-test"},  # a path: never run
            {"problem": "2/1", "source": marked(WRONG, "batch 3"), "model": "batch-test"},
            {"problem": "2/1", "source": marked(HONEST, "batch 4"), "backend": "cuda", "model": "batch-test"},
        ])  # fmt: skip
        assert [i.status for i in items] == [202, 400, 202, 400] and items[1].job is None
        assert "cuda" in (items[3].error or "")  # a backend this CPU service cannot run
        assert "a path is not a problem" in (items[1].error or "")
        first, third = (c.wait(i.job.id).typed_verdict() for i in (items[0], items[2]) if i.job)
        assert (first.status, third.status) == (Status.OK, Status.MISMATCH)  # type: ignore[union-attr]
        # the last of a burst waits behind the others on the one lane: cancelled before it runs
        burst = c.submit_many([{"problem": "2/1", "source": marked(HONEST, f"burst {i}"), "model": "cancel-test"}
                               for i in range(6)])  # fmt: skip
        last = burst[-1].job
        assert last is not None
        cancelled = c.cancel(last.id)
        assert cancelled.state.value == "cancelled" and c.wait(last.id).verdict is None
        done = c.wait(burst[0].job.id)  # type: ignore[union-attr]
        with pytest.raises(ServiceError, match="409: job .* is done: only a job that has not started"):
            c.cancel(done.id)
        for item in burst[1:-1]:
            assert c.wait(item.job.id).state.value == "done"  # type: ignore[union-attr]
    with Store(service.store) as db:
        kept = [r.candidate_source for r in db.records(done.run_id or "") if r.key.model == "cancel-test"]
    assert len(kept) == 5 and marked(HONEST, "burst 5") not in kept  # nothing filed for the cancelled one


@ONE_SERVICE
def test_a_remote_episode_runs_turn_by_turn(service: Service) -> None:
    answers = [
        "I would fuse the GEMM and the ReLU into one loop.",
        f"```python\n{marked(WRONG, 'episode')}\n```",
        f"```python\n{marked(HONEST, 'episode')}\n```",
    ]
    with Client(service.url, token=TOKEN) as c:
        with pytest.raises(ServiceError, match="400: .*a path is not a problem"):
            c.start_episode("/tmp/problem.py")
        ep = c.start_episode("2/1", max_turns=3, model="episode-test")
        assert ep.problem.key == PROBLEM and ep.turn == 0 and not ep.done
        assert ep.messages[-1].role == "user" and "class Model(" in ep.messages[-1].content
        steps = [c.step(ep.id, text) for text in answers]
        assert [s.status for s in steps] == [Status.NO_CODE, Status.MISMATCH, Status.OK]
        assert [s.reward for s in steps] == [0.0, 0.0, 1.0] and [s.done for s in steps] == [
            False,
            False,
            True,
        ]
        assert steps[2].truncated and "correct" in steps[2].feedback and "No usable code" in steps[0].feedback
        assert steps[1].typed_verdict().candidate_digest == digest(marked(WRONG, "episode"))
        with pytest.raises(ServiceError, match="409: episode .* is over"):
            c.step(ep.id, answers[2])
        after = c.episode(ep.id)
        assert (after.turn, after.done, after.rewards) == (3, True, [0.0, 0.0, 1.0])
        assert [m.role for m in after.messages[-6:]] == ["assistant", "user"] * 3
        assert after.messages[-1].content == steps[2].feedback
        c.end_episode(ep.id)
        with pytest.raises(ServiceError, match="404: no episode"):
            c.episode(ep.id)
        run = c.health().run_id or ""
    with Store(service.store) as db:
        records = [r for r in db.records(run) if r.key.model == "episode-test"]
    assert [(r.key.sample, r.key.turn) for r in records] == [(ep.sample, t) for t in range(3)]
    assert [r.completion_text for r in records] == answers


def _start(
    tmp_path_factory: pytest.TempPathFactory,
    shared_builds: Path,
    store: Path,
    run: str,
    *more: str,
    env_more: dict[str, str] | None = None,
) -> Service:
    env = {**os.environ, "KBENCH_CACHE_DIR": str(shared_cache(tmp_path_factory, shared_builds)),
           "KBENCH_SERVE_TOKEN": TOKEN, **(env_more or {})}  # fmt: skip
    args = ["serve", "--port", "0", "--store", str(store), "--run", run, "--device", "cpu", "--backend", "cpp",
            "--preset", "small", "--no-timing", *more]  # fmt: skip
    proc = _kbench(args, env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("kbench serve: http://127.0.0.1:"), line + proc.communicate(timeout=60)[1]
    return Service(line.split()[2], proc, store)


def test_accepted_jobs_survive_a_killed_service_and_a_retry_is_never_judged_twice(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path
) -> None:
    store = tmp_path_factory.mktemp("durable") / "kbench.db"
    first = _start(tmp_path_factory, shared_builds, store, "durable-run")
    sources = [marked(HONEST, f"durable {i}") for i in range(6)]
    with Client(first.url, token=TOKEN) as c:
        ids = [c.submit("2/1", src, model="durable").id for src in sources[:5]]
        retry = [c.submit_many([{"problem": "2/1", "source": sources[5], "model": "durable",
                                 "idempotency_key": "client-42"}])[0].job for _ in range(2)]  # fmt: skip
    assert retry[0] is not None and retry[1] is not None and retry[0].id == retry[1].id
    ids.append(retry[0].id)
    owner = procs.ProcRef.of(first.proc.pid)
    first.proc.kill()  # no goodbye: whatever was queued or running is lost with the process
    first.proc.communicate(timeout=60)
    deadline = time.monotonic() + 10  # its workers and warm starter end with it, within moments
    while left := [
        p for p in procs.all_pids() if procs.owner_of(p) == owner and (i := procs.info_of(p)) and i.alive
    ]:
        assert time.monotonic() < deadline, [Path(f"/proc/{p}/cmdline").read_bytes()[:200] for p in left]
        time.sleep(0.1)
    with Store(store) as db:  # what the killed service had accepted and not finished: queued again below
        assert len(Journal(db).open_jobs("durable-run")) >= 2
    second = _start(tmp_path_factory, shared_builds, store, "durable-run")
    try:
        with Client(second.url, token=TOKEN) as c:
            views = [c.wait(ident, timeout=300) for ident in ids]  # the old ids, answered after the restart
            again = c.submit_many([{"problem": "2/1", "source": sources[5], "model": "durable",
                                    "idempotency_key": "client-42"}])[0].job  # fmt: skip
        assert [v.id for v in views] == ids and {v.state.value for v in views} == {"done"}
        assert again is not None and again.id == ids[5]
        assert [v.typed_verdict().candidate_digest for v in views] == [digest(s) for s in sources]  # type: ignore[union-attr]
    finally:
        second.proc.send_signal(signal.SIGTERM)
        second.proc.communicate(timeout=60)
    with Store(store) as db:
        records = [r for r in db.records("durable-run") if r.key.model == "durable"]
    assert len(records) == 6 and sorted(r.key.sample for r in records) == list(range(6))  # none twice
    assert sorted(r.candidate_source for r in records) == sorted(sources)


def test_a_service_on_ray_judges_and_files_what_its_clients_send(
    tmp_path_factory: pytest.TempPathFactory, shared_builds: Path, short_tmp: Path
) -> None:
    """Scale-out's path: `kbench serve --executor ray` (a local Ray here; `--ray-address` names a
    cluster) hands its queue to Ray's lanes in batches. Four clients at once: every job judged once, its
    own verdict, filed in the service's run; stopped, it ends Ray with it."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'kbench[ray]')")
    store = tmp_path_factory.mktemp("ray-serve") / "kbench.db"
    ray_dir = short_tmp / "ray"  # Ray's socket paths must fit in 107 bytes: not under pytest's folders
    service = _start(tmp_path_factory, shared_builds, store, "ray-run", "--executor", "ray",
                     env_more={"KBENCH_RAY_TMP": str(ray_dir)})  # fmt: skip
    results: dict[str, tuple[str, Status]] = {}
    errors: list[BaseException] = []

    def client(n: int) -> None:
        try:
            with Client(service.url, token=TOKEN) as c:
                for i in range(2):
                    source = marked(HONEST if (n + i) % 2 else WRONG, f"ray client {n} job {i}")
                    job = c.submit("2/1", source, model="ray-test")
                    view = c.wait(job.id, timeout=300)
                    verdict = view.typed_verdict()
                    assert verdict is not None and verdict.candidate_digest == digest(source), view
                    results[job.id] = (source, verdict.status)
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        assert not errors, errors[0]
        assert len(results) == 8
        for source, status in results.values():
            assert status is (Status.OK if HONEST in source else Status.MISMATCH)
    finally:
        service.proc.send_signal(signal.SIGTERM)
        _, err = service.proc.communicate(timeout=120)
    assert service.proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    with Store(store) as db:
        records = [r for r in db.records("ray-run") if r.key.model == "ray-test"]
    assert sorted(r.key.sample for r in records) == list(range(8))  # each once
    assert {r.candidate_source for r in records} == {source for source, _ in results.values()}
    assert ray_dir.is_dir()  # the service's local Ray kept its session there, and its processes name it
    ray_tmp = str(ray_dir).encode()
    deadline = time.monotonic() + 30
    while left := [p for p in procs.all_pids() if ray_tmp in _cmdline(p)]:
        assert time.monotonic() < deadline, [_cmdline(p)[:200] for p in left]
        time.sleep(0.2)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@ONE_SERVICE
def test_the_remote_episode_example_runs_as_the_readme_shows(service: Service) -> None:
    """examples/remote_episode.py against the service: recorded answers replayed turn by turn."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "examples" / "remote_episode.py"), "--url", service.url],
        env={**os.environ, "KBENCH_SERVE_TOKEN": TOKEN}, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == [
        "turn 0: no_code reward 0.000", "turn 1: mismatch reward 0.000", "turn 2: ok reward 1.000",
    ]  # fmt: skip


@ONE_SERVICE
def test_the_openapi_document_types_every_answer_and_the_token(service: Service) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", service.port, timeout=60)
    conn.request("GET", "/openapi.json")
    doc = json.loads(conn.getresponse().read())
    conn.close()
    assert doc["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http", "scheme": "bearer", "description": "the token `kbench serve` was started with",
    }  # fmt: skip
    paths = doc["paths"]
    assert {
        "/v1/jobs",
        "/v1/jobs/batch",
        "/v1/jobs/{ident}",
        "/v1/episodes",
        "/v1/episodes/{ident}/step",
    } <= set(paths)
    for path, methods in paths.items():
        for method, op in methods.items():
            schemas = {c: r.get("content", {}).get("application/json", {}).get("schema", {})
                       for c, r in op["responses"].items()}  # fmt: skip
            refusals = {c for c, schema in schemas.items() if schema.get("$ref", "").endswith("/ErrorView")}
            assert {"400", "401", "404", "422", "429"} <= refusals, (method, path)
            assert op.get("security") == [{"HTTPBearer": []}], (method, path)
    schemas = doc["components"]["schemas"]
    verdict = schemas["JobView"]["properties"]["verdict"]["anyOf"][0]
    assert verdict["properties"]["status"]["enum"][:2] == ["ok", "static_reject"]
    assert "median_ms" in json.dumps(verdict) and "$ref" not in json.dumps(verdict)
    assert schemas["StepView"]["properties"]["verdict"]["properties"]["status"]["enum"][0] == "ok"


def test_it_listens_elsewhere_only_with_a_token(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a bearer token"):
        check_bind("0.0.0.0", None)
    check_bind("0.0.0.0", TOKEN)
    check_bind("::1", None)
    check_bind("localhost", None)
    with pytest.raises(ConfigError, match="at least 16"):
        read_token(None, {"KBENCH_SERVE_TOKEN": "short"})
    assert read_token(None, {}) is None
    (tmp_path / "token").write_text(TOKEN + "\n")
    assert read_token(tmp_path / "token", {}) == TOKEN
    env = {k: v for k, v in os.environ.items() if k != "KBENCH_SERVE_TOKEN"}
    proc = _kbench(["serve", "--host", "0.0.0.0", "--port", "0"], env)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "needs a bearer token" in err


def test_a_tokenless_service_answers_only_to_its_own_names() -> None:
    """DNS rebinding: a page whose name resolves to 127.0.0.1 reaches a tokenless service from a browser,
    with its own name in the Host header; the service answers only to its loopback names."""
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from kbench.serve.app import _host
    from kbench.serve.server import service_hosts

    assert service_hosts("0.0.0.0", "a-token-long-enough-to-pass") is None
    hosts = service_hosts("127.0.0.1", None)
    assert hosts is not None and {"localhost", "127.0.0.1", "::1"} <= hosts
    app = FastAPI(dependencies=[_host(hosts)])
    app.get("/ping")(lambda: {"ok": True})
    client = TestClient(app)
    for name in ("localhost:8000", "127.0.0.1:9", "[::1]:8000", "LOCALHOST"):
        assert client.get("/ping", headers={"Host": name}).status_code == 200, name
    for name in ("evil.example", "evil.example:8000", "127.0.0.1.evil.example", ""):
        answer = client.get("/ping", headers={"Host": name})
        assert answer.status_code == 421 and "this service answers to" in answer.json()["detail"], name
