"""Thin CLI: each module registers its commands on the shared typer app and calls the library."""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from kbench.cli import agent as _agent  # noqa: E402,F401
from kbench.cli import evaluate as _evaluate  # noqa: E402,F401
from kbench.cli import generate as _generate  # noqa: E402,F401
from kbench.cli import inspect as _inspect  # noqa: E402,F401
from kbench.cli import mcp as _mcp  # noqa: E402,F401

# Importing a command module registers its commands.
from kbench.cli import problems as _problems  # noqa: E402,F401
from kbench.cli import results as _results  # noqa: E402,F401
from kbench.cli import run as _run  # noqa: E402,F401
from kbench.cli import selftest as _selftest  # noqa: E402,F401
from kbench.cli import serve as _serve  # noqa: E402,F401
from kbench.cli import system as _system  # noqa: E402,F401
from kbench.cli import verify as _verify  # noqa: E402,F401
from kbench.cli.app import app, err_console, teardown_skipped
from kbench.errors import KbenchError
from kbench.version import VERSION


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kbench {VERSION}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """kbench: is this kernel correct, and faster than PyTorch eager and torch.compile?"""


def _end_starters() -> None:
    starter = sys.modules.get("kbench.sandbox.starter")
    if starter is not None:
        starter.kill_all()


def main() -> None:
    from kbench.sandbox.host import Interrupted, stop_on_signals

    try:
        with stop_on_signals():
            app()
    except SystemExit as done:
        if not teardown_skipped():
            raise
        sys.stdout.flush()
        sys.stderr.flush()
        _end_starters()  # an idle one outlives its Evaluator, and no atexit runs past os._exit
        os._exit(done.code if isinstance(done.code, int) else 0)
    except KbenchError as exc:
        # escaped: a message may hold brackets that are not markup (`pip install 'kbench[serve]'`)
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except Interrupted as exc:
        # Every worker of this process is dead by now (stop_all); what finished is in the store.
        kept = f"; {exc.kept}" if exc.kept else "; every worker it started was ended"
        err_console.print(
            f"[bold yellow]stopped:[/] {escape(f'{exc}{kept}')}", highlight=False, soft_wrap=True
        )
        sys.stdout.flush()
        sys.stderr.flush()
        # Everything was unwound and closed on the way here (stores, job folders, workers, starters);
        # the interpreter's own teardown with torch loaded took 0.5-1.7 s more on a loaded 2-core host.
        os._exit(exc.exit_code)
