"""`kbench env`: the machine and toolchain, i.e. the hardware fingerprint stored with every result."""

from __future__ import annotations

import typer
from rich.table import Table

from kbench.cli.app import Format, app, console, print_json


@app.command("env")
def env_cmd(fmt: Format = typer.Option(Format.table, "--format", help="table or json")) -> None:
    """Show GPU, driver, CUDA, torch, Triton, nvcc, ninja and CPU: the hardware fingerprint."""
    from kbench.hardware import environment, fingerprint

    info = dict(environment())
    info["fingerprint"] = fingerprint(info)
    if fmt is Format.json:
        print_json(info)
        return
    table = Table(title="kbench environment", show_header=False)
    for key, value in info.items():
        table.add_row(key, "-" if value is None else str(value))
    console.print(table)
