"""`kbench verify`: run and lint reference problems (time, peak memory, lint findings)."""

from __future__ import annotations

import typer
from rich.table import Table

from kbench.cli.app import Format, app, console, err_console, print_json
from kbench.problems import select
from kbench.verify import VerifyResult, verify_problems


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
    strict: bool = typer.Option(False, "--strict", help="lint warnings are failures (exit code 1)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no per-problem progress lines on stderr"),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Build and run reference problems: eager time, peak memory, and lint findings."""
    chosen = select(source, level=level, ids=problems or None)
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
