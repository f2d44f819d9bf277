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
