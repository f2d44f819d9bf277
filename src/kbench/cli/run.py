"""`kbench run`: generate (or take the shipped solutions), evaluate, record and report in one command."""

from __future__ import annotations

from pathlib import Path

import typer

from kbench.cli.app import app, console, err_console
from kbench.cli.evaluate import prewarm_starter
from kbench.cli.generate import BACKENDS, problems_flag, progress_bar, select_problems
from kbench.config import RunConfig, resolve
from kbench.errors import ConfigError
from kbench.store import VerdictKey
from kbench.types import Verdict


def _gpu_present(device: str) -> bool:
    if device == "cpu":
        return False
    import torch

    return bool(torch.cuda.is_available())


def _verdict_line(key: VerdictKey, v: Verdict) -> str:
    speed = v.speedup("eager")
    compiled = v.speedup("compile")
    parts = [
        f"{key.problem_key:<14}",
        f"{key.backend:<6}",
        f"s{key.sample}t{key.turn}",
        f"{v.status.value:<13}",
    ]
    if speed is not None:
        parts.append(f"{speed:6.2f}x eager")
    if compiled is not None:
        parts.append(f"{compiled:6.2f}x compile")
    if v.generalizes is not None:
        parts.append("generalizes" if v.generalizes else "does not generalize")
    if v.rule:
        parts.append(f"[{v.rule}]")
    if v.status.value != "ok" and v.message:
        parts.append(v.message.splitlines()[0][:80])
    return "  ".join(parts)


def _solutions_config(cfg: RunConfig, preset: str | None, backend: str | None) -> tuple[RunConfig, list[str]]:
    from kbench.pipeline import solution_backends

    gpu = _gpu_present(cfg.device)
    backends = solution_backends(gpu, backend)
    if not gpu and any(b != "cpp" for b in backends):
        raise ConfigError(f"backend {backends[0]} needs a CUDA GPU; without one use --backend cpp")
    update: dict[str, object] = {"preset": preset or ("full" if gpu else "small")}
    if not gpu:
        update["device"] = "cpu"
        err_console.print(
            "[yellow]no GPU found:[/] evaluating the shipped C++ (OpenMP) solutions on the `small` preset on "
            "the CPU; on a GPU machine the same command evaluates the CUDA and Triton solutions"
        )
    return cfg.model_copy(update=update), backends


def _report(cfg: RunConfig, run_id: str, html: Path | None) -> Path:
    from kbench.report import load_series, print_summary, write_html
    from kbench.store import Store

    with Store(cfg.store) as store:
        print_summary(load_series(store, [run_id]), console)
        path = write_html(store, [run_id], html or cfg.store.parent / f"{run_id}.html")
    return path


@app.command("run")
def run_cmd(
    solutions: str | None = typer.Option(
        None, "--solutions", help="'reference': evaluate the shipped hand-fused solutions (no model needed)"
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="PROVIDER/MODEL (openai/..., anthropic/..., replay/PATH)"
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML or JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s"),
    level: int | None = typer.Option(None, "--level", "-l"),
    problems: str | None = typer.Option(
        None, "--problems", help="N (the first N) or comma-separated addresses"
    ),
    tag: list[str] = typer.Option([], "--tag", "-t"),
    backend: str | None = typer.Option(None, "--backend", "-b", help=BACKENDS),
    preset: str | None = typer.Option(None, "--preset", "-p", help="default: full on a GPU, small on CPU"),
    dtype: str | None = typer.Option(None, "--dtype"),
    device: str | None = typer.Option(None, "--device"),
    samples: int | None = typer.Option(None, "--samples", "-n"),
    turns: int | None = typer.Option(None, "--turns"),
    base_url: str | None = typer.Option(None, "--base-url"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="variable holding the API key"),
    concurrency: int | None = typer.Option(None, "--concurrency", "-j"),
    executor: str | None = typer.Option(None, "--executor", help="local | ray"),
    ray_address: str | None = typer.Option(None, "--ray-address"),
    timeout: float | None = typer.Option(None, "--timeout", help="seconds per candidate worker"),
    store: Path | None = typer.Option(None, "--store", help="results database"),
    resume: str | None = typer.Option(None, "--resume", help="continue run RUN: finished verdicts are kept"),
    html: Path | None = typer.Option(None, "--html", help="where to write the HTML report"),
    no_static: bool = typer.Option(False, "--no-static", help="skip the static checks"),
    hidden_shapes: bool = typer.Option(
        False, "--hidden-shapes", help="ok candidates are also checked at sizes drawn per evaluation"
    ),
) -> None:
    """Generate (or take the shipped solutions), evaluate, store and report — the whole pipeline."""
    from kbench import pipeline

    if bool(solutions) == bool(model):
        raise ConfigError("give exactly one of --solutions reference or --model PROVIDER/MODEL")
    if solutions not in (None, "reference"):
        raise ConfigError(f"--solutions {solutions!r}: the only shipped set is 'reference'")
    flags = dict(
        model=model, source=source, level=level, tags=tag or None, dtype=dtype, device=device,
        samples=samples, turns=turns, base_url=base_url, api_key_env=api_key_env, concurrency=concurrency,
        executor=executor, ray_address=ray_address, timeout_s=timeout, store=store,
        static_checks=False if no_static else None, hidden_shapes=True if hidden_shapes else None,
        backend=None if solutions else backend, preset=None if solutions else preset,
    )  # fmt: skip
    cfg = resolve(config, flags | problems_flag(problems))
    prewarm_starter(cfg)
    chosen = select_problems(cfg) if (cfg.level or cfg.problems or cfg.tags or not solutions) else None
    with progress_bar() as bar:
        task = bar.add_task("evaluate", total=None, note="")

        def show(key: VerdictKey, verdict: Verdict) -> None:
            bar.console.print(_verdict_line(key, verdict), highlight=False)
            bar.update(task, advance=1)

        if solutions:
            cfg, backends = _solutions_config(cfg, preset, backend)
            chosen = chosen or select_problems(cfg.model_copy(update={"level": 2}))
            outcome = pipeline.run_solutions(cfg, chosen, backends, resume, on_verdict=show)
        else:
            if "preset" not in cfg.model_fields_set and not _gpu_present(cfg.device):
                cfg = cfg.model_copy(update={"preset": "small"})  # the documented default without a GPU
            outcome = pipeline.run_model(cfg, chosen or [], resume, on_verdict=show)
    path = _report(cfg, outcome.run_id, html)
    console.print(
        f"run {outcome.run_id}: {outcome.recorded} new verdicts, {outcome.skipped} kept from before; "
        f"store {outcome.store}; report {path}",
        highlight=False,
        soft_wrap=True,  # keep paths on one line for scripts that read them
    )
    if outcome.failed_requests:
        err_console.print(
            f"[yellow]{outcome.failed_requests} LLM requests failed[/]; re-run with --resume {outcome.run_id}"
        )
        raise typer.Exit(1)
