"""`kbench list` and `kbench show`: browse problem sources."""

from __future__ import annotations

import typer
from rich.syntax import Syntax
from rich.table import Table

from kbench.cli.app import Format, app, console, print_json
from kbench.problems import get_problem, load, select
from kbench.types import Problem


def _row(p: Problem) -> dict[str, object]:
    return {
        "key": p.key,
        "level": p.level,
        "id": p.number,
        "name": p.name,
        "tags": list(p.tags),
        "presets": list(p.presets),
        "path": p.path,
    }


@app.command("list")
def list_cmd(
    source: str = typer.Option("kbench", "--source", "-s", help="kbench | hf | hf=PATH | a folder | a file"),
    level: int | None = typer.Option(None, "--level", "-l"),
    tag: list[str] = typer.Option([], "--tag", "-t", help="keep problems with this tag (repeatable)"),
    solutions: str | None = typer.Option(
        None,
        "--solutions",
        help="keep problems with a shipped solution for this backend (kbench list-backends)",
    ),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """List the problems of a source."""
    problems = select(source, level=level, tags=tag)
    if solutions is not None:
        from kbench.backends import get_backend
        from kbench.solutions import shipped_candidate

        get_backend(solutions)  # an unknown name lists the known ones
        problems = [p for p in problems if shipped_candidate(p, solutions) is not None]
    if fmt is Format.json:
        print_json([_row(p) for p in problems])
        return
    table = Table(title=f"{len(problems)} problems from {source}")
    for col in ("key", "name", "tags", "presets"):
        table.add_column(col)
    for p in problems:
        table.add_row(p.key, p.name, ", ".join(p.tags), ", ".join(p.presets))
    console.print(table)


def _input_shapes(address: str, preset: str) -> list[str]:
    import torch

    loaded = load(get_problem(address), preset)
    torch.manual_seed(0)
    shapes = []
    for x in loaded.get_inputs():
        shapes.append(f"{tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else repr(x))
    return shapes


@app.command("show")
def show_cmd(
    problem: str = typer.Argument(..., help="SOURCE:LEVEL/ID, LEVEL/ID, a name or a problem file"),
    preset: str = typer.Option("full", "--preset", "-p"),
    shapes: bool = typer.Option(True, "--shapes/--no-shapes", help="build the inputs to report shapes"),
    code: bool = typer.Option(True, "--code/--no-code", help="print the problem's source after the table"),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Show one problem: source, sizes per preset, tags and input shapes."""
    p = get_problem(problem)
    loaded = load(p, preset)
    data = _row(p) | {"description": p.description, "preset": preset, "sizes": loaded.sizes}
    data["tolerance"] = {d: p.tol(d) for d in ("fp32", "fp16", "bf16")}
    if shapes:
        data["input_shapes"] = _input_shapes(problem, preset)
    if fmt is Format.json:
        print_json(data | {"code": p.code})
        return
    table = Table(title=f"{p.key}  {p.name}", show_header=False)
    for key in ("description", "path", "tags", "presets", "preset", "sizes", "input_shapes", "tolerance"):
        if key in data:
            value = data[key]
            table.add_row(key, ", ".join(map(str, value)) if isinstance(value, list) else str(value))
    console.print(table)
    if code:
        console.print(Syntax(p.code, "python", line_numbers=True))
