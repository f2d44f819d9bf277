"""`kbench mcp`: kbench's tools for agent harnesses, over stdio or streamable HTTP (mcp/)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from kbench.cli.app import app, err_console
from kbench.cli.evaluate import prewarm_starter
from kbench.cli.serve import cpu_defaults
from kbench.config import resolve
from kbench.errors import ConfigError

TOKEN_ENV = "KBENCH_MCP_TOKEN"


def _token(given: str | None, no_token: bool, http: bool) -> str | None:
    token = (given or os.environ.get(TOKEN_ENV, "")).strip() or None
    if http and token is None and not no_token:
        raise ConfigError(
            f"kbench mcp --http runs submitted code: give it a bearer token (--token or {TOKEN_ENV}), "
            "or pass --no-token to serve without one"
        )
    return token


@app.command("mcp")
def mcp_cmd(
    http: bool = typer.Option(False, "--http", help="serve streamable HTTP at /mcp instead of stdio"),
    host: str = typer.Option("127.0.0.1", "--host", help="with --http: the address to listen on"),
    port: int = typer.Option(8000, "--port", help="with --http: TCP port (0: any free one, printed)"),
    token: str | None = typer.Option(None, "--token", help=f"with --http: the bearer token (or {TOKEN_ENV})"),
    no_token: bool = typer.Option(False, "--no-token", help="with --http: serve without a token"),
    max_calls: int | None = typer.Option(None, "--max-calls", help="tool calls the session may make"),
    max_evals: int | None = typer.Option(
        None, "--max-evals", help="check, evaluate and profile calls it may make"
    ),
    max_eval_seconds: float | None = typer.Option(
        None,
        "--max-eval-seconds",
        help="seconds of check, evaluate and profile it may spend (GPU seconds on a GPU)",
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML/JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s", help="the problems served (default: kbench)"),
    backend: str | None = typer.Option(None, "--backend", "-b", help="default backend of the tools"),
    preset: str | None = typer.Option(None, "--preset", help="shape preset (default: full; small on a CPU)"),
    dtype: str | None = typer.Option(None, "--dtype", help="fp32 | fp16 | bf16"),
    device: str | None = typer.Option(None, "--device", help="auto | cpu | cuda | cuda:N"),
    store: Path | None = typer.Option(None, "--store", help="results database (submits are filed there)"),
    run_id: str | None = typer.Option(
        None, "--run", help="file submits in this run (continued if it exists)"
    ),
    model: str | None = typer.Option(None, "--model", help="the name submits are filed under"),
    no_timing: bool = typer.Option(False, "--no-timing", help="correctness and protocol checks only"),
    hidden_shapes: bool = typer.Option(
        False, "--hidden-shapes", help="submits are also checked at hidden sizes"
    ),
) -> None:
    """Serve kbench's tools to an agent over MCP: problems, check, evaluate, submit, inspect."""
    from kbench.errors import require

    require("mcp.server.mcpserver", "mcp")  # the missing extra is named before anything starts
    from kbench.mcp import Budget, Workbench
    from kbench.mcp.server import build_server, run_http, run_stdio

    secret = _token(token, no_token, http)
    flags = dict(source=source, backend=backend, preset=preset, dtype=dtype, device=device, store=store,
                 run_id=run_id, measure=False if no_timing else None,
                 hidden_shapes=True if hidden_shapes else None)  # fmt: skip
    cfg = resolve(config, flags)
    prewarm_starter(cfg)
    cfg = cpu_defaults(cfg)  # stdio: every line of ours goes to stderr, stdout is the protocol's
    bench = Workbench(cfg, Budget(max_calls, max_evals, max_eval_seconds), model)
    server = build_server(bench)
    err_console.print(
        f"kbench mcp: run {bench.run_id}, store {cfg.store}, device {cfg.device}, backend {cfg.backend}, "
        f"preset {cfg.preset}",
        highlight=False,
        soft_wrap=True,
    )
    try:
        if http:
            announce = lambda url: err_console.print(f"kbench mcp: {url}", highlight=False)  # noqa: E731
            run_http(server, host, port, secret, announce)
        else:
            run_stdio(server)
    finally:
        bench.close()
