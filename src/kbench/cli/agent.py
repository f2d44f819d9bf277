"""Agent runs on the command line: `kbench import-agent` (the final answers and transcripts of agent runs
made elsewhere, judged and filed) and what `kbench run --agent` says of its budgets."""

from __future__ import annotations

from pathlib import Path

import typer

from kbench.cli.app import app, console
from kbench.cli.devices import apply_device_defaults
from kbench.cli.evaluate import prewarm_starter
from kbench.config import RunConfig, resolve


def agent_budget(cfg: RunConfig) -> str:
    """An agent session's budgets, as `kbench run --agent`'s header names them."""

    def limit(value: float | None, unit: str) -> str:
        return f"no limit of {unit}" if value is None else f"{value:,g} {unit}"

    return ", ".join([
        limit(cfg.agent_max_calls, "tool calls"), limit(cfg.agent_max_evals, "check/evaluate/profile calls"),
        limit(cfg.agent_max_device_s, "s of evaluation"), limit(cfg.agent_max_tokens, "tokens"),
        limit(cfg.agent_max_wall_s, "s of wall time"),
    ])  # fmt: skip


@app.command("import-agent")
def import_agent_cmd(
    folder: Path = typer.Argument(
        ..., help="answers level_L_problem_P_sample_S.py, transcripts beside (.jsonl)"
    ),
    model: str = typer.Option(..., "--model", "-m", help="the name the answers are filed under (the agent)"),
    config: Path | None = typer.Option(None, "--config", help="TOML or JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s", help="the problems' source (default: kbench)"),
    backend: str | None = typer.Option(None, "--backend", "-b", help="cuda | triton | cpp"),
    preset: str | None = typer.Option(None, "--preset", "-p", help="default: full on a GPU, small on CPU"),
    dtype: str | None = typer.Option(None, "--dtype"),
    device: str | None = typer.Option(None, "--device"),
    store: Path | None = typer.Option(None, "--store", help="results database"),
    run_id: str | None = typer.Option(None, "--run", help="file into this run (continued if it exists)"),
    html: Path | None = typer.Option(None, "--html", help="where to write the HTML report"),
) -> None:
    """Judge an outside agent's final answers under the whole protocol and file them, transcripts included."""
    from kbench.agent.imports import import_sessions
    from kbench.report import load_series, print_summary, write_html
    from kbench.store import Store

    flags = dict(source=source, backend=backend, preset=preset, dtype=dtype, device=device, store=store,
                 run_id=run_id, model=model)  # fmt: skip
    cfg = apply_device_defaults(resolve(config, flags))
    prewarm_starter(cfg)
    run, filed = import_sessions(cfg, folder, model)
    with Store(cfg.store) as db:
        print_summary(load_series(db, [run]), console)
        path = write_html(db, [run], html or cfg.store.parent / f"{run}.html")
    console.print(f"run {run}: {filed} answers of {model} judged; store {cfg.store}; report {path}",
                  highlight=False, soft_wrap=True)  # fmt: skip
