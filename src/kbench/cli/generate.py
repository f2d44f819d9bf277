"""`kbench prompt` and `kbench generate`: print a prompt; ask a model for candidates and store them."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kbench.backends import BUILTIN
from kbench.cli.app import Format, app, console, err_console, print_json
from kbench.config import RunConfig, resolve
from kbench.errors import ConfigError
from kbench.problems import get_problem, select
from kbench.types import Problem

# The help's list: the built-in backends (reading the plugins' entry points would slow every start).
BACKENDS = " | ".join(BUILTIN) + " (or a plugin's: kbench env lists them)"


def select_problems(cfg: RunConfig) -> list[Problem]:
    """The problems a run config selects: source, level, tags, addresses, limit."""
    problems = select(cfg.source, level=cfg.level, tags=cfg.tags, ids=cfg.problems or None, limit=cfg.limit)
    if not problems:
        raise ConfigError(
            f"no problems selected from source {cfg.source!r} (check --level, --tag, --problems)"
        )
    return problems


def problems_flag(value: str | None) -> dict[str, object]:
    """`--problems 3` keeps the first 3; `--problems 2/1,2/5` names addresses."""
    if not value:
        return {}
    if value.isdigit():
        return {"limit": int(value)}
    return {"problems": [p.strip() for p in value.split(",") if p.strip()]}


@app.command("prompt")
def prompt_cmd(
    problem: str = typer.Argument(..., help="SOURCE:LEVEL/ID, LEVEL/ID, a name or a problem file"),
    backend: str | None = typer.Option(None, "--backend", "-b", help=f"{BACKENDS} (default: cuda)"),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32 | fp16 | bf16"),
    shots: str = typer.Option("one", "--shots", help="zero | one | few"),
    hardware: str | None = typer.Option(None, "--hardware", help="GPU name for hardware facts, e.g. H100"),
    cot: bool = typer.Option(False, "--cot/--no-cot", help="chain-of-thought variant"),
    preset: str = typer.Option("full", "--preset", "-p", help="the sizes the problem shows (e.g. small)"),
    fmt: Format = typer.Option(Format.table, "--format", help="table (the text) or json"),
) -> None:
    """Print the exact prompt a model gets for one problem (system prompt first)."""
    from kbench.prompts import PromptOptions, build_prompt

    chosen = backend or RunConfig().backend
    p = build_prompt(get_problem(problem), PromptOptions(chosen, dtype, shots, hardware, cot, preset))
    if fmt is Format.json:
        print_json({"problem": p.problem_key, "system": p.system, "text": p.text, "options": dict(p.options)})
        return
    typer.echo(f"[system]\n{p.system}\n\n[user]\n{p.text}", nl=False)


def progress_bar() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[note]}"),
        console=err_console,
    )


@app.command("generate")
def generate_cmd(
    model: str = typer.Option(
        ..., "--model", "-m", help="PROVIDER/MODEL: openai/..., anthropic/..., replay/PATH"
    ),
    out: Path = typer.Option(Path("kbench-runs/generate"), "--out", "-o", help="output folder (resumable)"),
    config: Path | None = typer.Option(None, "--config", help="TOML or JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s"),
    level: int | None = typer.Option(None, "--level", "-l"),
    problems: str | None = typer.Option(
        None, "--problems", help="N (the first N) or comma-separated addresses"
    ),
    tag: list[str] = typer.Option([], "--tag", "-t"),
    backend: str | None = typer.Option(None, "--backend", "-b", help=BACKENDS),
    preset: str | None = typer.Option(
        None, "--preset", "-p", help="the sizes the prompt shows: those the candidates will be evaluated at"
    ),
    dtype: str | None = typer.Option(None, "--dtype"),
    samples: int | None = typer.Option(None, "--samples", "-n"),
    temperature: float | None = typer.Option(
        None, "--temperature", help="default: 0 for one sample, 0.7 with --samples > 1"
    ),
    top_p: float | None = typer.Option(None, "--top-p", help="nucleus sampling (default: the server's)"),
    max_tokens: int | None = typer.Option(None, "--max-tokens"),
    reasoning_effort: str | None = typer.Option(None, "--reasoning-effort"),
    concurrency: int | None = typer.Option(None, "--concurrency", "-j"),
    base_url: str | None = typer.Option(None, "--base-url"),
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="variable holding the API key"),
    shots: str | None = typer.Option(None, "--shots", help="zero | one | few"),
    hardware: str | None = typer.Option(None, "--hardware", help="GPU name for hardware facts"),
    cot: bool | None = typer.Option(None, "--cot/--no-cot"),
    cache: bool | None = typer.Option(
        None, "--cache/--no-cache", help="answer identical requests from the response cache (default: on)"
    ),
    retries: int | None = typer.Option(None, "--retries", help="retries of a request on 429/5xx/errors"),
) -> None:
    """Ask a model for candidates: one file per problem/sample in OUT/candidates, plus OUT/journal.jsonl.

    Re-running with the same OUT asks only what is missing.
    """
    from kbench.generate import generate, make_client

    flags = dict(
        model=model, source=source, level=level, tags=tag or None, backend=backend, preset=preset,
        dtype=dtype, samples=samples, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
        reasoning_effort=reasoning_effort, concurrency=concurrency, base_url=base_url, api_key_env=api_key_env,
        shots=shots, hardware_facts=hardware, chain_of_thought=cot, response_cache=cache, llm_retries=retries,
    )  # fmt: skip
    cfg = resolve(config, flags | problems_flag(problems))
    chosen = select_problems(cfg)
    client = make_client(cfg)
    err_console.print(
        f"{cfg.model}: {len(chosen)} problems x {cfg.samples} samples, temperature {cfg.sampling_temperature:g}"
        f"{' (the default with --samples > 1)' if cfg.temperature is None and cfg.samples > 1 else ''}, "
        f"preset {cfg.preset}, response cache {'on' if cfg.response_cache else 'off'}",
        highlight=False,
    )
    with progress_bar() as bar:
        task = bar.add_task(f"generate {cfg.model}", total=len(chosen) * cfg.samples, note="")

        def advance(attempt) -> None:  # type: ignore[no-untyped-def]
            bar.update(task, advance=1, note=client.usage.summary())

        result = generate(chosen, cfg, out, client=client, on_attempt=advance)
    no_code = sum(a.candidate is None for a in result.attempts)
    console.print(
        f"{len(result.attempts)} answers ({result.resumed} from an earlier run, {no_code} without code) in {out}"
    )
    console.print(result.usage.summary(), highlight=False)
    if result.failed:
        err_console.print(
            f"[yellow]{len(result.failed)} requests failed after retries[/] "
            f"(first: {result.failed[0].no_code_reason}); run the same command again to retry them"
        )
        raise typer.Exit(1)
