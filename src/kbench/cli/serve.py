"""`kbench serve`: the evaluator as an HTTP service (serve/), one run for the service's whole life."""

from __future__ import annotations

from pathlib import Path

import typer

from kbench.backends import default_backend
from kbench.cli.app import app, console, err_console
from kbench.cli.evaluate import prewarm_starter
from kbench.config import RunConfig, resolve


def cpu_defaults(cfg: RunConfig) -> RunConfig:
    """Without a GPU the service (and `kbench mcp`) judges C++ candidates on the CPU on the `small`
    preset, unless told."""
    import torch

    if cfg.device != "cpu" and torch.cuda.is_available():
        return cfg
    update: dict[str, object] = {"device": "cpu"}
    if "backend" not in cfg.model_fields_set:
        update["backend"] = default_backend(gpu=False)
    if "preset" not in cfg.model_fields_set:
        update["preset"] = "small"
    err_console.print(
        f"[yellow]no GPU:[/] evaluating {update.get('backend', cfg.backend)} candidates on the CPU "
        f"(preset {update.get('preset', cfg.preset)})"
    )
    return cfg.model_copy(update=update)


@app.command("serve")
def serve_cmd(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (others need a token)"),
    port: int = typer.Option(8000, "--port", help="TCP port (0: any free port, printed at start)"),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="file holding the bearer token (or set KBENCH_SERVE_TOKEN)"
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML/JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s", help="the problems served (default: kbench)"),
    backend: str | None = typer.Option(None, "--backend", "-b", help="default backend of submissions"),
    preset: str | None = typer.Option(None, "--preset", help="shape preset (default: full; small on a CPU)"),
    dtype: str | None = typer.Option(None, "--dtype", help="fp32 | fp16 | bf16"),
    device: str | None = typer.Option(None, "--device", help="auto | cpu | cuda | cuda:N"),
    store: Path | None = typer.Option(None, "--store", help="results database"),
    run_id: str | None = typer.Option(
        None, "--run", help="file verdicts in this run (continued if it exists)"
    ),
    no_timing: bool = typer.Option(False, "--no-timing", help="correctness and protocol checks only"),
    executor: str | None = typer.Option(
        None, "--executor", help="local (this machine) | ray (the lanes of a Ray cluster: --ray-address)"
    ),
    ray_address: str | None = typer.Option(
        None, "--ray-address", help="a Ray cluster (default: a local Ray)"
    ),
    cpu_lanes: int | None = typer.Option(
        None,
        "--cpu-lanes",
        help="evaluations at once on the CPU, each on cores of its own (default: 1 timed, else a core each)",
    ),
    max_queue: int = typer.Option(256, "--max-queue", help="pending jobs before submissions get 429"),
    max_body_mib: float = typer.Option(4.0, "--max-body-mib", help="largest request body (413 beyond)"),
    max_wait: float = typer.Option(60.0, "--max-wait", help="longest long poll, seconds"),
) -> None:
    """Evaluate candidates submitted over HTTP, on this machine's GPUs (or its CPU), warm and recorded."""
    from kbench.api import Evaluator, EvaluatorOptions
    from kbench.errors import require
    from kbench.serve import ServiceLimits, check_bind, read_token, serve

    require("fastapi", "serve")  # the missing extra is named before anything starts
    require("uvicorn", "serve")
    flags = dict(source=source, backend=backend, preset=preset, dtype=dtype, device=device, store=store,
                 run_id=run_id, measure=False if no_timing else None, executor=executor,
                 ray_address=ray_address, cpu_lanes=cpu_lanes)  # fmt: skip
    cfg = resolve(config, flags)
    token = read_token(token_file)
    check_bind(host, token)  # before anything starts
    prewarm_starter(cfg)
    cfg = cpu_defaults(cfg)
    limits = ServiceLimits(int(max_body_mib * 2**20), max_queue, max_wait)
    evaluator = Evaluator(cfg, EvaluatorOptions(sources_only=True))

    def announce(url: str) -> None:
        console.print(
            f"kbench serve: {url} (run {evaluator.run_id}, store {cfg.store}, device {cfg.device}, "
            f"backend {cfg.backend}, preset {cfg.preset}, executor {cfg.executor}"
            f"{', token required' if token else ''})",
            highlight=False,
            soft_wrap=True,
        )

    try:
        serve(evaluator, host, port, token, limits, announce)
    finally:
        evaluator.close(cancel=True)
