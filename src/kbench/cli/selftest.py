"""`kbench selftest`: run the anti-cheat fixture suite against the installed evaluator, print a table."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from kbench.cli.app import Format, app, console, print_json
from kbench.cli.generate import BACKENDS


@app.command("selftest")
def selftest_cmd(
    device: str = typer.Option(
        "cpu", "--device", help="cpu (cpp + Triton interpreter) or cuda (every fixture)"
    ),
    backend: list[str] = typer.Option([], "--backend", help=f"only these backends (repeatable): {BACKENDS}"),
    select: str = typer.Option("", "--select", help="only fixtures whose id contains this text"),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
    share: bool = typer.Option(
        True,
        "--share/--no-share",
        help="share a problem's reference run among its fixtures (a run's warm path); --no-share: each "
        "runs its own, the path of `kbench eval` and of a problem evaluated once in a batch",
    ),
) -> None:
    """Prove this setup catches every known cheat: each fixture must get its expected verdict.

    Exits 1 when any fixture got another verdict.
    """
    from kbench.errors import ConfigError
    from kbench.selftest.runner import gpu_only, missing_backends, run_suite

    if device not in ("cpu", "cuda"):
        raise ConfigError(f"--device must be cpu or cuda (got {device!r})")
    outcomes = run_suite(backends=backend or None, gpu=device == "cuda", select=select, share=share)
    missing = {} if backend else missing_backends()
    if fmt is Format.json:
        print_json(
            [
                {
                    "fixture": o.fixture.id,
                    "expected": o.fixture.expected,
                    "got": o.got,
                    "passed": o.passed,
                    "seconds": round(o.seconds, 2),
                    "message": o.message[:300],
                }
                for o in outcomes
            ]
        )
    else:
        table = Table(title=f"kbench selftest ({device}{'' if share else ', no shared references'})")
        for col in ("fixture", "expected", "got", "pass", "s"):
            table.add_column(col)
        for o in outcomes:
            mark = "[green]yes[/]" if o.passed else "[bold red]NO[/]"
            table.add_row(
                escape(o.fixture.id), escape(o.fixture.expected), escape(o.got), mark, f"{o.seconds:.1f}"
            )
        console.print(table)
        for name, why in missing.items():
            console.print(f"[yellow]skipped[/] the {name} fixtures: {escape(why)}")
        for name, count in ({} if device == "cuda" else gpu_only(backend or None)).items():
            if name not in missing:
                console.print(f"[yellow]skipped[/] {count} {name} fixtures: they need a GPU (--device cuda)")
        console.print(
            f"{sum(o.passed for o in outcomes)}/{len(outcomes)} fixtures got their expected verdict"
        )
    if not all(o.passed for o in outcomes):
        raise typer.Exit(1)
