"""The MCP server: kbench's tools on the `mcp` SDK's MCPServer, over stdio or streamable HTTP.

Over HTTP every request needs `Authorization: Bearer TOKEN` (a small ASGI wrapper answers 401 before
the SDK sees the request); the SDK's own auth is OAuth, which an agent harness on the same host or a
trainer with a shared secret does not need.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from pydantic import Field

from kbench.mcp.tools import ToolRefusal, Workbench

INSTRUCTIONS = (
    "kbench judges GPU/CPU kernels written for PyTorch problems. A problem is a `Model` (its reference "
    "code); a candidate is a Python file defining `class ModelNew(nn.Module)` with the same constructor, "
    "whose forward runs kernels of its own (C++ or CUDA through torch.utils.cpp_extension.load_inline, "
    "or Triton). Read a problem with show_problem and inspect, try candidates with check, evaluate and "
    "profile, and give your final answer with submit (once per problem)."
)

Problem = Annotated[str, Field(description="a problem address: LEVEL/ID (2/1), SOURCE:LEVEL/ID or a name")]
Source = Annotated[str, Field(description="the candidate: a whole Python file defining class ModelNew")]
Backend = Annotated[
    str | None, Field(description="cpp | cuda | triton (default: the server's, show_problem names it)")
]


def build_server(bench: Workbench) -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    from kbench.version import VERSION

    server = MCPServer(name="kbench", instructions=INSTRUCTIONS, version=VERSION)

    async def answer(work: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        try:
            return await work()
        except ToolRefusal as exc:
            raise ToolError(str(exc)) from None

    def threaded(fn: Callable[..., dict[str, Any]], *args: Any) -> Callable[[], Awaitable[dict[str, Any]]]:
        return lambda: asyncio.to_thread(fn, *args)

    @server.tool()
    async def list_problems(
        level: Annotated[int | None, Field(description="keep this level: 1, 2 or 3")] = None,
        tag: Annotated[
            str | None, Field(description="keep problems with this fusion tag, e.g. softmax")
        ] = None,
    ) -> dict[str, Any]:
        """List the problems this server judges (its one source): key, level, name and fusion tags."""
        return await answer(threaded(bench.list_problems, level, tag))

    @server.tool()
    async def show_problem(problem: Problem) -> dict[str, Any]:
        """One problem: its reference code (the Model to beat), its sizes at the server's preset, input
        shapes, dtype, tolerance and the default backend."""
        return await answer(threaded(bench.show_problem, problem))

    @server.tool()
    async def check(problem: Problem, source: Source, backend: Backend = None) -> dict[str, Any]:
        """Static checks and the build (compile) of a candidate, without running it: the checks'
        findings and the compiler's errors. Counts against the evaluation budget."""
        return await answer(lambda: bench.check(problem, source, backend))

    @server.tool()
    async def evaluate(problem: Problem, source: Source, backend: Backend = None) -> dict[str, Any]:
        """Run a candidate: correctness against the reference over several seeds (error sizes and
        mismatch counts; neither seeds nor reference values are shown), its time against PyTorch eager
        and, on a GPU, the fraction of the problem's speed-of-light it reached. A practice verdict: not
        recorded, not the final one. Counts against the evaluation budget."""
        return await answer(lambda: bench.evaluate(problem, source, backend))

    @server.tool()
    async def profile(problem: Problem, source: Source, backend: Backend = None) -> dict[str, Any]:
        """evaluate's practice verdict with a profile: which of the candidate's own kernels ran and
        their share of its time, its time against eager and torch.compile, the problem's speed-of-light
        and the fraction of it reached (on a GPU), and the reference's eager forward kernel by kernel
        (on a CPU: its aten operators). Not recorded. Counts against the evaluation budget."""
        return await answer(lambda: bench.profile(problem, source, backend))

    @server.tool()
    async def submit(problem: Problem, source: Source, backend: Backend = None) -> dict[str, Any]:
        """Give the final answer for a problem: judged under the whole protocol (secret seeds, anti-cheat
        rules, timing against eager and torch.compile) and recorded. One submit per problem and session:
        a second one answers the first verdict again and judges nothing."""
        return await answer(lambda: bench.submit(problem, source, backend))

    @server.tool()
    async def inspect(problem: Problem) -> dict[str, Any]:
        """The problem's fusion opportunities: groups of operators a fused kernel could merge and the
        bytes that saves, and its roofline speed-of-light. No profile: the profile tool has the
        reference's eager kernels."""
        return await answer(lambda: bench.inspect(problem))

    return server


class BearerGate:
    """ASGI wrapper: HTTP requests without `Authorization: Bearer <token>` get 401; lifespan passes."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _unauthorized(send)
                return
        await self.app(scope, receive, send)


async def _unauthorized(send: Any) -> None:
    body = b'{"error": "unauthorized: send Authorization: Bearer <token> (the server\'s --token)"}'
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def run_stdio(server: Any) -> None:
    import anyio

    anyio.run(server.run_stdio_async)


def run_http(server: Any, host: str, port: int, token: str | None, announce: Callable[[str], None]) -> None:
    import uvicorn

    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerGate(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    http = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.ensure_future(http.serve())
        while not http.started and not task.done():
            await asyncio.sleep(0.05)
        if http.started:
            bound = http.servers[0].sockets[0].getsockname()[1]
            announce(f"http://{host}:{bound}/mcp")
        await task

    asyncio.run(main())
