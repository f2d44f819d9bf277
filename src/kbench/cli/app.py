"""The typer application object and the output helpers every command module shares."""

from __future__ import annotations

import json
import os
from enum import Enum
from typing import Any

import typer
from rich.console import Console
from rich.measure import Measurement
from typer.core import TyperGroup, TyperOption

_UNBOUNDED = 1 << 16  # columns: wider than any table kbench prints


class _Console(Console):
    """A rich console that, writing to a file or a pipe (a log, `| less`, `> out.txt`), prints each table at
    its natural width and each line of text whole: rich would cut both at 80 columns there, turning
    fixture names into `gelu_tanh/wrong/la…`. On a terminal it is rich's own; COLUMNS, read as each print happens, sets the width."""

    def print(self, *objects: Any, **kw: Any) -> None:
        columns = os.environ.get("COLUMNS", "")
        if columns.isdigit() and "width" not in kw:  # as set now, not when this console was made
            self._at_width(int(columns), objects, kw)
            return
        if self.is_terminal or "width" in kw:
            super().print(*objects, **kw)
            return
        if all(isinstance(o, str) for o in objects):
            kw.setdefault("soft_wrap", True)
        wide = self.options.update(width=_UNBOUNDED)
        needed = max(
            (Measurement.get(self, wide, o).maximum for o in objects if not isinstance(o, str)), default=0
        )
        if needed <= self.width:
            super().print(*objects, **kw)
        else:
            self._at_width(needed, objects, kw)

    def _at_width(self, width: int, objects: tuple[Any, ...], kw: dict[str, Any]) -> None:
        narrow, self.width = self.width, width  # rich's own `width=` cannot go past the console's
        try:
            super().print(*objects, **kw)
        finally:
            self.width = narrow


def _plain_flags(params: list[Any]) -> list[Any]:
    """An on/off flag takes no value, so its help shows none (typer's help would read `--version <bool>`)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag:
            param.metavar = ""
    return params


class _Group(TyperGroup):
    """The kbench command group: every command's help lists its flags without a value type."""

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain_flags(super().get_params(ctx))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _plain_flags(command.get_params(ctx))
        return command


app = typer.Typer(
    name="kbench",
    cls=_Group,
    help="Benchmark GPU kernels written by language models: correct, and faster than eager and torch.compile?",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = _Console()
err_console = _Console(stderr=True)


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
