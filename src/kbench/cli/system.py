"""`kbench env`: the machine and toolchain (the hardware fingerprint stored with every result); `kbench doctor`:
kbench's processes and GPU leases on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


@app.command("doctor")
def doctor_cmd(
    kill: bool = typer.Option(
        False, "--kill", help="end stale processes, reclaim stale GPU leases, remove bad cache entries"
    ),
    cache_dir: Path = typer.Option(
        None, "--cache-dir", help="the cache to check (default: the configured one)", show_default=False
    ),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
) -> None:
    """List kbench's processes, GPU leases and bad build-cache entries; with --kill, end the stale ones.

    Stale: started by a kbench process that is gone. Bad: a cached build, precompiled header or shim
    whose files no longer match their recorded digests, or a staging folder of a builder that is gone.
    Exit code 1 when stale or bad ones remain."""
    from kbench.config import RunConfig
    from kbench.sandbox import doctor

    cache = cache_dir or RunConfig().cache_dir
    ended, broken = doctor.end_stale() if kill else ([], [])
    removed: list[Any] = []
    if kill:
        removed = doctor.cache_entries(cache)[1]
        doctor.remove(removed)
    found, leases = doctor.processes(), doctor.leases()
    good, bad = doctor.cache_entries(cache)
    if fmt is Format.json:
        print_json(
            {
                "processes": [_process_row(p) for p in found],
                "leases": [_lease_row(s) for s in leases],
                "cache": {"folder": str(cache), "verified": good, "bad": [_entry_row(e) for e in bad]},
                "ended": [p.pid for p in ended],
                "reclaimed": [s.name for s in broken],
                "removed": [str(e.path) for e in removed],
            }
        )
    else:
        _print_doctor(found, leases, ended, broken)
        _print_cache(cache, good, bad, removed)
    if any(p.stale for p in found) or any(s.stale for s in leases) or bad:
        raise typer.Exit(1)


def _entry_row(e: Any) -> dict[str, Any]:
    return {"path": str(e.path), "kind": e.kind, "problem": e.problem}


def _print_cache(cache: Path, good: int, bad: list[Any], removed: list[Any]) -> None:
    if removed:
        console.print(f"removed {len(removed)} bad cache entries")
    console.print(f"build cache {cache / 'builds'}: {good} entries verify, {len(bad)} do not")
    if bad:
        table = Table(title="bad build-cache entries (never loaded; built again when needed)")
        for col in ("kind", "problem", "path"):
            table.add_column(col)
        for e in bad:
            table.add_row(e.kind, e.problem, str(e.path))
        console.print(table)


def _process_row(p: Any) -> dict[str, Any]:
    owner = p.owner.pid if p.owner else None
    return {"pid": p.pid, "role": p.role, "owner": owner, "stale": p.stale, "age_s": round(p.age_s, 1),
            "command": p.command}  # fmt: skip


def _lease_row(s: Any) -> dict[str, Any]:
    holder = s.holder.describe() if s.holder and s.held else None
    return {"name": s.name, "state": s.state, "holder": holder, "lock_pids": list(s.pids)}


def _print_doctor(found: list[Any], leases: list[Any], ended: list[Any], broken: list[Any]) -> None:
    if ended or broken:
        console.print(
            f"ended {len(ended)} stale processes ({', '.join(str(p.pid) for p in ended) or '-'}); "
            f"reclaimed {len(broken)} stale leases ({', '.join(s.name for s in broken) or '-'})"
        )
    table = Table(title="kbench processes on this machine")
    for col in ("pid", "role", "owner", "state", "age", "command"):
        table.add_column(col)
    for p in found:
        owner = f"{p.owner.pid} ({'gone' if p.stale else 'alive'})" if p.owner else "-"
        state = "[red]stale[/]" if p.stale else "running"
        table.add_row(str(p.pid), p.role, owner, state, f"{p.age_s:.0f} s", p.command[:60])
    console.print(table if found else "no kbench processes on this machine")
    lease_table = Table(title="GPU leases")
    for col in ("lease", "state", "holder (its record)", "lock held by"):
        lease_table.add_column(col)
    for s in leases:
        holder = s.holder.describe() if s.holder and s.held else "-"
        pids = ", ".join(f"pid {pid}" for pid in s.pids) or "-"
        lease_table.add_row(s.name, "[red]stale[/]" if s.stale else s.state, holder, pids)
    console.print(lease_table if leases else "no GPU leases on this machine")
    if any(p.stale for p in found) or any(s.stale for s in leases):
        console.print("stale processes or leases remain: `kbench doctor --kill` ends them")
