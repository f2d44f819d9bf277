"""Helpers of the `kbench mcp` tests: start the server as a subprocess and talk to it with the SDK's own
clients (stdio and streamable HTTP)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from evalfixtures import cpu_config_file

KBENCH = str(Path(sys.executable).with_name("kbench"))
TOKEN = "test-token-0123456789abcdef"


def server_config(folder: Path) -> Path:
    """A CPU run config for the server (evalfixtures.cpu_config's settings, the static checks on)."""
    return cpu_config_file(folder, static_checks=True)


def server_env(cache_dir: Path) -> dict[str, str]:
    return dict(os.environ) | {"KBENCH_CACHE_DIR": str(cache_dir), "COLUMNS": "200"}


def text_of(result: Any) -> str:
    """Everything a tool result shows the agent: its text blocks and its structured content."""
    parts = [getattr(block, "text", "") for block in result.content]
    return "\n".join(parts) + json.dumps(result.structured_content or {})


async def with_stdio(args: list[str], env: dict[str, str], body: Callable[[Any], Awaitable[None]]) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=KBENCH, args=["mcp", *args], env=env)
    with open(os.devnull, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await body(session)


def run_http_session(url: str, body: Callable[[Any], Awaitable[None]]) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async def main() -> None:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await body(session)

    anyio.run(main)


def start_http(args: list[str], env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`kbench mcp --http --port 0 ...` and the URL it announces on stderr."""
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [KBENCH, "mcp", "--http", "--port", "0", *args], env=env, stdout=subprocess.DEVNULL, stderr=err
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text().splitlines():
            if line.startswith("kbench mcp: http://"):
                return proc, line.removeprefix("kbench mcp: ").strip()
        time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"kbench mcp --http did not start:\n{log.read_text()[-2000:]}")
