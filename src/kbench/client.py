"""A Python client for `kbench serve`, on the standard library's http.client (no extra to install).

    from kbench.client import Client

    with Client("http://127.0.0.1:8000", token=None) as client:
        verdict = client.evaluate("2/1", source)          # submit, long-poll, the typed Verdict
        job = client.submit("2/23", other)                # or step by step: a job id ...
        job = client.wait(job.id, timeout=600)            # ... its state once done (or the timeout)
        ep = client.start_episode("2/1", max_turns=3)     # a remote RL episode: ep.messages to the model
        step = client.step(ep.id, completion)             # step.reward, step.feedback, step.done

Every refusal of the service raises `ServiceError` with its status and one-line message. One Client may be
shared by threads: each thread keeps its own keep-alive connection. A connection idle for longer than
the service keeps it open is replaced before a submission is sent, so a submission is never sent twice
(a second one would be judged as a new sample).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from typing import Any

from kbench.api.jobs import JobState
from kbench.errors import KbenchError
from kbench.serve.wire import API, BatchItem, BatchView, EpisodeView, Health, JobView, ProblemView, StepView
from kbench.types import Verdict

POLL_S = 30.0  # one long poll; the service caps it at its own max_wait_s
IDLE_S = 2.0  # reuse a connection idle for less than this (uvicorn closes idle ones after 5 s)
ENDED = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)


class ServiceError(KbenchError):
    """The service refused a request (`status`, `detail`), or a job ended without a verdict."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"{status}: {detail}")
        self.status, self.detail = status, detail


class Client:
    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r}: expected http://HOST:PORT or https://HOST:PORT")
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname, parts.port
        self._headers = {"Accept": "application/json"} | (
            {"Authorization": f"Bearer {token}"} if token else {}
        )
        self.timeout = timeout
        self._local = threading.local()

    # the service's endpoints ---------------------------------------------------------------------------

    def submit(
        self,
        problem: str,
        source: str,
        backend: str | None = None,
        *,
        sample: int | None = None,
        turn: int = 0,
        model: str | None = None,
        priority: int | None = None,
        timeout_s: float | None = None,
    ) -> JobView:
        """Queue one candidate. `priority`: higher first among the jobs waiting; `timeout_s`: each of the
        candidate's phases at most this long (it only shortens the service's budgets)."""
        # sent as given: the service validates it and answers a bad field with a 4xx (ServiceError)
        fields = {"problem": problem, "source": source, "backend": backend, "sample": sample, "turn": turn,
                  "model": model, "priority": priority, "timeout_s": timeout_s}  # fmt: skip
        body = {k: v for k, v in fields.items() if v is not None}
        return JobView.model_validate(self._call("POST", "/jobs", body))

    def submit_many(self, submissions: list[dict[str, Any]]) -> list[BatchItem]:
        """Several submissions in one request (each a dict of `submit`'s fields: problem, source, backend,
        sample, turn, model, completion, priority, timeout_s): per item its job, or the status and reason
        it was refused."""
        body = {"jobs": [{k: v for k, v in one.items() if v is not None} for one in submissions]}
        return BatchView.model_validate(self._call("POST", "/jobs/batch", body)).jobs

    def cancel(self, ident: str) -> JobView:
        """Cancel a job that has not started running (ServiceError 409 once it runs or ended)."""
        return JobView.model_validate(self._call("DELETE", f"/jobs/{ident}"))

    def start_episode(
        self,
        problem: str,
        backend: str | None = None,
        *,
        model: str | None = None,
        max_turns: int | None = None,
        stop_when_correct: bool | None = None,
        end_on_cheat: bool | None = None,
        reward: str | None = None,
    ) -> EpisodeView:
        """A remote RL episode on `problem`: its `messages` (system first) are what the model answers."""
        fields = {"problem": problem, "backend": backend, "model": model, "max_turns": max_turns,
                  "stop_when_correct": stop_when_correct, "end_on_cheat": end_on_cheat, "reward": reward}  # fmt: skip
        return EpisodeView.model_validate(
            self._call("POST", "/episodes", {k: v for k, v in fields.items() if v is not None})
        )

    def step(self, episode: str, completion: str, timeout: float = 3600.0) -> StepView:
        """Judge one completion of the episode; waits up to `timeout` seconds for its verdict (a step is
        never sent twice: a lost connection raises, and `episode(id).turn` says whether it was judged)."""
        return StepView.model_validate(
            self._call("POST", f"/episodes/{episode}/step", {"completion": completion}, wait=timeout)
        )

    def episode(self, ident: str) -> EpisodeView:
        return EpisodeView.model_validate(self._call("GET", f"/episodes/{ident}"))

    def end_episode(self, ident: str) -> None:
        self._call("DELETE", f"/episodes/{ident}")

    def job(self, ident: str) -> JobView:
        return JobView.model_validate(self._call("GET", f"/jobs/{ident}"))

    def wait(self, ident: str, timeout: float | None = None) -> JobView:
        """The job once it ended (done, failed, cancelled), or as it is when `timeout` seconds passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_S if deadline is None else min(POLL_S, max(0.0, deadline - time.monotonic()))
            job = JobView.model_validate(
                self._call("GET", f"/jobs/{ident}/wait?timeout={left:.3f}", wait=left)
            )
            if job.state in ENDED or (deadline is not None and time.monotonic() >= deadline):
                return job

    def verdict(self, ident: str) -> Verdict:
        """The job's verdict (ServiceError while it runs, or when it failed)."""
        return _typed(self.job(ident))

    def evaluate(
        self,
        problem: str,
        source: str,
        backend: str | None = None,
        *,
        sample: int | None = None,
        turn: int = 0,
        model: str | None = None,
    ) -> Verdict:
        """Submit and wait: the verdict, or ServiceError when the job failed or was cancelled."""
        job = self.submit(problem, source, backend, sample=sample, turn=turn, model=model)
        return _typed(self.wait(job.id))

    def problems(self, level: int | None = None, tag: str | None = None) -> list[ProblemView]:
        query = urllib.parse.urlencode({k: v for k, v in (("level", level), ("tag", tag)) if v is not None})
        return [ProblemView.model_validate(p) for p in self._call("GET", f"/problems?{query}")]

    def health(self) -> Health:
        return Health.model_validate(self._call("GET", "/health"))

    # transport ---------------------------------------------------------------------------------------

    def _connection(self, fresh: bool) -> http.client.HTTPConnection:
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        idle = time.monotonic() - getattr(self._local, "used", 0.0)
        if conn is not None and (fresh or idle > IDLE_S):
            conn.close()
            conn = None
        if conn is None:
            kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = self._local.conn = kind(self._host, self._port, timeout=self.timeout)
        return conn

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None, wait: float = 0.0) -> Any:
        payload = None if body is None else json.dumps(body).encode()
        headers = self._headers | ({"Content-Type": "application/json"} if payload is not None else {})
        for attempt in (0, 1):
            conn = self._connection(fresh=attempt > 0)
            conn.timeout = self.timeout + wait
            try:
                conn.request(method, API + path, payload, headers)
                response = conn.getresponse()
                data = response.read()
                break
            except (ConnectionError, http.client.HTTPException):
                conn.close()
                self._local.conn = None
                if method != "GET" or attempt:  # a submission is never sent twice
                    raise
        self._local.used = time.monotonic()
        return _decode(response.status, data)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode(status: int, data: bytes) -> Any:
    try:
        parsed = json.loads(data) if data else None
    except json.JSONDecodeError:
        parsed = None
    if status >= 400:
        detail = parsed.get("detail") if isinstance(parsed, dict) else data.decode(errors="replace")[:500]
        raise ServiceError(status, str(detail))
    return parsed


def _typed(job: JobView) -> Verdict:
    verdict = job.typed_verdict()
    if verdict is None:
        raise ServiceError(
            409, f"job {job.id} is {job.state.value}" + (f": {job.error}" if job.error else "")
        )
    return verdict
