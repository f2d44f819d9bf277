"""`kbench verify`: run and lint reference problems (time, peak memory, lint findings); with `--trivial`,
judge the trivial answers (problems/trivial.py) against each problem instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from kbench.cli.app import Format, app, console, err_console, print_json
from kbench.errors import ConfigError
from kbench.problems import select
from kbench.types import DTYPES, Problem
from kbench.verify import VerifyResult, checked_device, verify_problems

if TYPE_CHECKING:
    from kbench.problems.trivial import TrivialResult


def _mib(n: int | None) -> str:
    return "-" if n is None else f"{n / 2**20:.1f}"


def _progress(result: VerifyResult) -> None:
    mark = "FAIL" if result.broken else ("warn" if result.findings else "ok")
    err_console.print(
        f"{mark:4} {result.problem_key} {result.name} ({result.seconds:.2f} s)", highlight=False
    )


def _table(results: list[VerifyResult], strict: bool) -> Table:
    table = Table(title=f"verify: {len(results)} problems")
    for col in ("key", "name", "eager ms", "peak MiB", "full MiB", "status", "findings"):
        table.add_column(col, overflow="fold")
    for r in results:
        status = "ok" if r.passed(strict) and not r.findings else ("warn" if r.passed(strict) else "FAIL")
        table.add_row(
            r.problem_key,
            r.name,
            "-" if r.eager_ms is None else f"{r.eager_ms:.3f}",
            _mib(r.peak_bytes),
            _mib(r.full_peak_bytes),
            status,
            "; ".join(f"{f.rule}: {f.message}" for f in r.findings),
        )
    return table


@app.command("verify")
def verify_cmd(
    problems: list[str] = typer.Argument(
        None, help="addresses (SOURCE:LEVEL/ID, LEVEL/ID, name); default all"
    ),
    source: str = typer.Option("kbench", "--source", "-s", help="kbench | hf | hf=PATH | a folder | a file"),
    level: int | None = typer.Option(None, "--level", "-l"),
    preset: str = typer.Option(
        "small", "--preset", "-p", help="shape preset to run (small on CPU, full on GPU)"
    ),
    device: str = typer.Option("auto", "--device", "-d", help="auto | cpu | cuda | cuda:N"),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="lint warnings (with --trivial: a passing trivial answer) are failures (exit 1)",
    ),
    trivial: bool = typer.Option(
        False, "--trivial", help="judge zeros, the input, fp16/bf16, noise and a constant as candidates"
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help="with --trivial: the evaluated dtype (default fp32)"
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no per-problem progress lines on stderr"),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Build and run reference problems: eager time, peak memory, and lint findings."""
    chosen = select(source, level=level, ids=problems or None)
    if dtype is not None and not trivial:
        raise ConfigError("--dtype applies to --trivial only (lint runs the problem as written)")
    if trivial:
        _trivial(chosen, preset, device, dtype, strict, quiet, fmt)
        return
    run = verify_problems(chosen, preset=preset, device=device, on_result=None if quiet else _progress)
    failures = run.failures(strict)
    if fmt is Format.json:
        print_json({"strict": strict, "failed": len(failures), "results": [r.to_dict() for r in run.results]})
    else:
        console.print(_table(run.results, strict))
        warned = sum(1 for r in run.results if r.findings)
        console.print(f"{len(run.results)} problems, {warned} with findings, {len(failures)} failed")
    if failures:
        raise typer.Exit(1)


def _trivial_progress(r: TrivialResult) -> None:
    mark = "FAIL" if r.failed else "ok"
    what = r.error or (f"passing: {', '.join(r.passing)}" if r.passing else "")
    err_console.print(
        f"{mark:4} {r.problem_key} {r.name} ({r.seconds:.2f} s) {what}", highlight=False, markup=False
    )


def _trivial_table(results: list[TrivialResult]) -> Table:
    from kbench.problems.trivial import ANSWERS

    table = Table(title=f"trivial answers: {len(results)} problems (tolerance each answer would need)")
    for col in ("key", "tol", *ANSWERS, "passing"):
        table.add_column(col, overflow="fold")
    for r in results:
        needed = {a.name: f"{a.needed_tol:.2g}" + (" PASS" if a.passed else "") for a in r.answers}
        passing = r.error or ", ".join(r.passing) or "-"
        table.add_row(r.problem_key, f"{r.tol:g}", *(needed.get(n, "-") for n in ANSWERS), passing)
    return table


def _trivial(
    chosen: list[Problem], preset: str, device: str, dtype: str | None, strict: bool, quiet: bool, fmt: Format
) -> None:
    """The trivial-answers sweep: exit 1 when a reference fails, or (--strict) when an answer passes."""
    from kbench.problems.trivial import SweepSettings, sweep

    dtype = dtype or "fp32"
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    settings = SweepSettings(preset=preset, dtype=dtype, device=checked_device(device))
    results = sweep(chosen, settings, on_result=None if quiet else _trivial_progress)
    broken = [r for r in results if r.error]
    passing = [r for r in results if r.passing]
    if fmt is Format.json:
        print_json({"strict": strict, "passing": len(passing), "broken": len(broken),
                    "results": [r.to_dict() for r in results]})  # fmt: skip
    else:
        console.print(_trivial_table(results))
        console.print(
            f"{len(results)} problems, {len(passing)} where a trivial answer passes, {len(broken)} broken"
        )
    if broken or (strict and passing):
        raise typer.Exit(1)
