"""The HTTP service's routes (FastAPI): submit, poll, wait, verdict, problems, health.

    POST /v1/jobs                      {problem, source, backend?, sample?, turn?, model?, completion?}
                                       -> 202 JobView (a resubmitted key: the same job, or the stored verdict;
                                       an Idempotency-Key header seen before: the job it named)
    GET  /v1/jobs/{id}                 -> JobView (poll)
    GET  /v1/jobs/{id}/wait?timeout=S  -> JobView once done, or after S seconds (long poll, S <= max_wait_s)
    GET  /v1/jobs/{id}/verdict         -> the verdict (409 while the job runs or when it failed)
    DELETE /v1/jobs/{id}               -> JobView, cancelled (409 once it runs or ended)
    POST /v1/jobs/batch                {jobs: [submission...]} -> 202 {jobs: [{job | status, error}]}
    /v1/episodes...                    remote RL episodes (serve/episodes.py)
    GET  /v1/problems?level=&tag=      -> [ProblemView] of the service's source
    GET  /v1/health                    -> status, run, device, queue depth

Every refusal is a 4xx with `{"detail": "one line"}`: 400 malformed JSON or a problem or backend this
service cannot evaluate, 401 a missing or wrong bearer token, 404 an unknown job, 409 a key that holds
another candidate, 413 a body over the limit, 415 a body not sent as JSON, 422 a missing field or one of
the wrong type, 429 a full queue. The
evaluations run in the service's one Evaluator (api/), so they are scheduled, warm and recorded exactly
as the library's are; accepted jobs are journaled in the run (serve/jobs.py), so a service started again
with `--run RUN` queues what it had not finished and answers for every id it gave.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, FastAPI, Header, Request
from fastapi.exceptions import HTTPException, RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from kbench.api import Evaluator, Ticket
from kbench.errors import ProblemError
from kbench.serve.episodes import episode_routes
from kbench.serve.jobs import ServiceJobs, check_room
from kbench.serve.server import ServiceLimits
from kbench.serve.wire import (
    API,
    BatchItem,
    BatchRequest,
    BatchView,
    ErrorView,
    Health,
    JobView,
    ProblemView,
    QueueView,
    SubmitRequest,
)
from kbench.store.journal import Journal
from kbench.version import VERSION


class BodyLimit:
    """Refuses a request body over `limit` bytes with 413 and a JSON message: at once when its declared
    Content-Length is over, else as soon as the bytes read pass it (a chunked upload). FastAPI's own
    `max_body_size` answered a declared oversize body in plain text, which clients cannot parse."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await JSONResponse({"detail": self.message()}, status_code=413)(scope, receive, send)
            return
        seen = 0

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise HTTPException(413, self.message())  # answered by FastAPI's handler, in JSON
            return message  # type: ignore[no-any-return]

        await self.app(scope, counted, send)

    def message(self) -> str:
        return f"the request body is over this service's limit of {self.limit} bytes"


def _one_line(request: Request, exc: RequestValidationError) -> tuple[int, str]:
    first = exc.errors()[0]
    if first.get("type") == "json_invalid":
        return 400, f"the request body is not valid JSON: {first.get('ctx', {}).get('error', first['msg'])}"
    loc = [str(x) for x in first.get("loc", ())]
    if loc == ["body"] and "json" not in request.headers.get("content-type", ""):
        return 415, "send the request body as JSON, with Content-Type: application/json"
    where = ".".join(x for x in loc if x != "body") or "body"
    return 422, f"field '{where}': {first['msg']}"


def _host(allowed: Collection[str] | None) -> Any:
    """A dependency that refuses a request whose Host header names none of `allowed` (no check when None;
    server.service_hosts says which)."""

    async def check(request: Request) -> None:
        if allowed is None:
            return
        try:
            name = urlsplit("//" + request.headers.get("host", "")).hostname or ""
        except ValueError:
            name = ""
        if name.lower() not in allowed:
            raise HTTPException(
                421, f"this service answers to {', '.join(sorted(allowed))}, not to Host {name!r}"
            )

    return Depends(check)


# What every route may answer besides its own result, each with ErrorView's one line (OpenAPI's responses)
REFUSALS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorView, "description": what}
    for code, what in (
        (400, "a malformed body, or a problem or backend this service cannot evaluate"),
        (401, "a missing or wrong bearer token (services started with one)"),
        (404, "an unknown job or episode"),
        (409, "a key that holds another candidate, or a job or episode in the wrong state"),
        (413, "a body or batch over the limit"),
        (415, "a body not sent as JSON"),
        (421, "a Host header this tokenless service does not answer to"),
        (422, "a missing field, or one of the wrong type or out of range"),
        (429, "the queue (or the table of episodes) is full: retry after Retry-After seconds"),
        (503, "the service is closing"),
    )
}
_BEARER = HTTPBearer(auto_error=False, description="the token `kbench serve` was started with")


def _bearer(token: str | None) -> Any:
    """A dependency that refuses requests without `Authorization: Bearer <token>` (none when no token: the
    OpenAPI then names no security scheme)."""

    async def check(credentials: HTTPAuthorizationCredentials | None = Depends(_BEARER)) -> None:
        given = credentials.credentials.strip() if credentials is not None else ""
        if not secrets.compare_digest(given.encode(), (token or "").encode()):
            raise HTTPException(401, "missing or wrong bearer token", {"WWW-Authenticate": "Bearer"})

    async def open_service() -> None:
        return None

    return Depends(check if token is not None else open_service)


async def _wait(ticket: Ticket, timeout: float) -> None:
    """Until the job ends or `timeout` passes, without holding a thread (8 long polls would otherwise
    take most of asyncio's default thread pool on a small host)."""
    if ticket.done() or timeout <= 0:
        return
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()

    def wake(_: object) -> None:
        try:
            loop.call_soon_threadsafe(ended.set)
        except RuntimeError:  # the loop closed: the service is stopping
            pass

    ticket.future.add_done_callback(wake)
    try:
        await asyncio.wait_for(ended.wait(), timeout)
    except TimeoutError:
        pass


def create_app(
    evaluator: Evaluator,
    token: str | None = None,
    limits: ServiceLimits | None = None,
    hosts: Collection[str] | None = None,
) -> FastAPI:
    """The service over an open Evaluator; closing the app (its lifespan) closes the Evaluator. Serve it
    wrapped in `BodyLimit(app, limits.max_body_bytes)`, as serve/server.py does. `hosts`: the only names
    its Host header may carry (None: any)."""
    limits = limits or ServiceLimits()
    store = None
    if evaluator.options.record and evaluator.run_id is not None:
        from kbench.store import Store

        store = Store(evaluator.config.store)
    jobs = ServiceJobs(evaluator, limits.keep_jobs, Journal(store) if store is not None else None)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await asyncio.to_thread(jobs.requeue)  # what a stopped or killed service had accepted, again
        yield
        await asyncio.to_thread(evaluator.close, True)
        if store is not None:
            store.close()

    checks = [_host(None if hosts is None else {h.lower().strip("[]") for h in hosts}), _bearer(token)]
    app = FastAPI(title="kbench", version=VERSION, lifespan=lifespan, dependencies=checks, responses=REFUSALS)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        status, message = _one_line(request, exc)
        return JSONResponse({"detail": message}, status_code=status)

    app.include_router(_job_routes(evaluator, jobs, limits), prefix=API)
    app.include_router(_info_routes(evaluator, limits), prefix=API)
    app.include_router(episode_routes(evaluator, limits, _allowed), prefix=API)
    return app


def _job_routes(evaluator: Evaluator, jobs: ServiceJobs, limits: ServiceLimits) -> APIRouter:
    router = APIRouter()
    admit = asyncio.Lock()  # one submission at a time passes the queue check and enters the queue

    @router.post("/jobs", status_code=202)
    async def submit(
        body: SubmitRequest, idempotency_key: str | None = Header(None, max_length=512)
    ) -> JobView:
        _allowed(body.problem, evaluator.config.source)
        async with admit:
            check_room(evaluator, limits)
            ident, ticket = await asyncio.to_thread(
                jobs.submit, body, idempotency_key or body.idempotency_key
            )
        return JobView.of(ticket, evaluator.run_id, ident)

    @router.post("/jobs/batch", status_code=202)
    async def submit_batch(body: BatchRequest) -> BatchView:
        if len(body.jobs) > limits.max_batch:
            raise HTTPException(413, f"{len(body.jobs)} jobs in one batch; at most {limits.max_batch}")
        items = []
        async with admit:
            for one in body.jobs:  # each admitted or refused alone: one bad item never fails the batch
                try:
                    _allowed(one.problem, evaluator.config.source)
                    check_room(evaluator, limits)
                    ident, ticket = await asyncio.to_thread(jobs.submit, one, one.idempotency_key)
                except HTTPException as exc:
                    items.append(BatchItem(status=exc.status_code, error=str(exc.detail)))
                    continue
                items.append(BatchItem(job=JobView.of(ticket, evaluator.run_id, ident)))
        return BatchView(jobs=items)

    @router.delete("/jobs/{ident}")
    async def cancel(ident: str) -> JobView:
        ticket = await asyncio.to_thread(jobs.cancel, ident)
        return JobView.of(ticket, evaluator.run_id, ident)

    @router.get("/jobs/{ident}")
    async def poll(ident: str) -> JobView:
        return JobView.of(await asyncio.to_thread(jobs.get, ident), evaluator.run_id, ident)

    @router.get("/jobs/{ident}/wait")
    async def wait(ident: str, timeout: float = 30.0) -> JobView:
        ticket = await asyncio.to_thread(jobs.get, ident)
        await _wait(ticket, min(max(timeout, 0.0), limits.max_wait_s))
        return JobView.of(ticket, evaluator.run_id, ident)

    @router.get("/jobs/{ident}/verdict")
    async def verdict(ident: str) -> dict[str, Any]:
        view = JobView.of(await asyncio.to_thread(jobs.get, ident), evaluator.run_id, ident)
        if view.verdict is not None:
            return view.verdict
        if view.error is not None:
            raise HTTPException(409, f"job {ident} failed, it has no verdict: {view.error}")
        raise HTTPException(409, f"job {ident} is {view.state.value}; poll or wait for it")

    return router


def _info_routes(evaluator: Evaluator, limits: ServiceLimits) -> APIRouter:
    router = APIRouter()

    @router.get("/problems")
    async def problems(level: int | None = None, tag: str | None = None) -> list[ProblemView]:
        from kbench.problems import select

        found = select(evaluator.config.source, level, [tag] if tag else None)
        return [ProblemView.of(p) for p in found]

    @router.get("/health")
    async def health() -> Health:
        return _health(evaluator, limits)

    return router


def _allowed(address: str, source: str) -> None:
    """The service evaluates problems of its own source only, named by LEVEL/ID or name: a problem's code
    is trusted (the reference worker runs it unconfined), so a client must never name a file or folder of
    this machine, a `..`, or another source."""
    from kbench.problems import check_in_source

    try:
        check_in_source(address, source)
    except ProblemError as exc:
        raise HTTPException(400, str(exc)) from None


def _health(evaluator: Evaluator, limits: ServiceLimits) -> Health:
    stats, cfg = evaluator.stats(), evaluator.config
    queue = QueueView(
        queued=stats.queued, building=stats.building, ready=stats.ready, running=stats.running,
        pending=stats.pending, capacity=limits.max_queue, finished=stats.finished, failed=stats.failed,
    )  # fmt: skip
    return Health(
        status="closing" if evaluator.closed else "ok",
        version=VERSION,
        run_id=evaluator.run_id,
        source=cfg.source,
        device=cfg.device,
        backend=cfg.backend,
        preset=cfg.preset,
        measure=cfg.measure,
        queue=queue,
        reference_runs=stats.reference_runs,
        reference_reuses=stats.reference_reuses,
    )
