"""The typer application object and the output helpers every command module shares."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="kbench",
    help="Benchmark GPU kernels written by language models: correct, and faster than eager and torch.compile?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


class Format(str, Enum):
    table = "table"
    json = "json"


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


_skip: list[bool] = []


def skip_teardown() -> None:
    """Ask `cli.main` to end the process without the interpreter's teardown once the command returns:
    0.5-1.5 s with torch and dynamo loaded, a fifth of a cold `kbench eval`'s unaccounted time on an H200
    host. For commands that closed everything they opened (background cache writes are waited for)."""
    _skip.append(True)


def teardown_skipped() -> bool:
    return bool(_skip)
