"""`kbench env`: the machine and toolchain (the hardware fingerprint stored with every result); `kbench doctor`:
kbench's processes and GPU leases on this machine."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from kbench.cli.app import Format, app, console, print_json


@app.command("env")
def env_cmd(fmt: Format = typer.Option(Format.table, "--format", help="table or json")) -> None:
    """Show GPU, driver, CUDA, torch, Triton, nvcc, ninja and CPU: the hardware fingerprint."""
    from kbench.hardware import environment, fingerprint

    info = dict(environment())
    info["fingerprint"] = fingerprint(info)
    backends = backends_here(bool(info["gpu"]))
    if fmt is Format.json:
        print_json(info | {"backends": backends})
        return
    table = Table(title="kbench environment", show_header=False)
    for key, value in info.items():
        table.add_row(key, "-" if value is None else str(value))
    for name, can in backends.items():
        version = f" ({can['version']})" if can["version"] else ""
        table.add_row(
            f"backend {name}", escape(can["here"] + version)
        )  # a fix may read "pip install 'kbench[triton]'"
    console.print(table)


def backends_here(gpu: bool) -> dict[str, dict[str, Any]]:
    """Whether each backend can evaluate candidates on this machine, where, and if not why: the check an
    evaluation runs first (`Backend.check_environment`), on the GPU when there is one and the backend's
    kernels are GPU kernels, else on the CPU; and the version of the tool that builds its kernels."""
    from kbench.backends import backend_names, get_backend
    from kbench.errors import ConfigError

    found: dict[str, dict[str, Any]] = {}
    for name in backend_names():
        backend = get_backend(name)
        device = "cuda" if gpu and backend.gpu_kernels else "cpu"
        try:
            if backend.needs_gpu and not gpu:
                raise ConfigError("needs a CUDA GPU, and torch sees none here")
            backend.check_environment(device)
        except ConfigError as exc:
            why = f"no: {exc}" + (
                f"; {backend.cpu_compile}" if backend.cpu_compile and backend.version() else ""
            )
            found[name] = {"runs": False, "device": None, "here": why, "version": backend.version()}
            continue
        if device == "cuda":
            here = "yes, on the GPU"
        elif (
            backend.gpu_kernels
        ):  # an interpreter or the host's compiler: right or wrong, but no time worth reading
            here = f"yes, on the CPU {backend.cpu_run}: correctness only, times mean nothing"
        else:
            here = "yes, on the CPU"
        found[name] = {"runs": True, "device": device, "here": here, "version": backend.version()}
    return found


@app.command("doctor")
def doctor_cmd(
    kill: bool = typer.Option(
        False,
        "--kill",
        help="end stale processes, reclaim stale GPU leases, remove bad cache entries and stale cgroups",
    ),
    cache_dir: Path = typer.Option(
        None, "--cache-dir", help="the cache to check (default: the configured one)", show_default=False
    ),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
) -> None:
    """List kbench's processes, GPU leases, bad build-cache entries and stale pids cgroups; with --kill,
    end the stale ones.

    Stale: started by a kbench process that is gone (a cgroup: empty, its runner gone). Bad: a cached
    build, precompiled header or shim whose files no longer match their recorded digests, or a staging
    folder of a builder that is gone.
    Exit code 1 when stale processes or leases or bad entries remain (an empty cgroup holds nothing, and
    the next job removes it)."""
    from kbench import doctor
    from kbench.config import RunConfig
    from kbench.sandbox import isolate

    cache = cache_dir or RunConfig().cache_dir
    ended, broken = doctor.end_stale() if kill else ([], [])
    removed: list[Any] = []
    if kill:
        removed = doctor.cache_entries(cache)[1]
        doctor.remove(removed)
        for folder in isolate.stale_cgroups():
            with contextlib.suppress(OSError):  # a runner of the same pid may have come since
                folder.rmdir()
    found, leases = doctor.processes(), doctor.leases()
    good, bad = doctor.cache_entries(cache)
    groups = isolate.stale_cgroups()
    if fmt is Format.json:
        print_json(
            {
                "processes": [_process_row(p) for p in found],
                "leases": [_lease_row(s) for s in leases],
                "cache": {"folder": str(cache), "verified": good, "bad": [_entry_row(e) for e in bad]},
                "ended": [p.pid for p in ended],
                "reclaimed": [s.name for s in broken],
                "removed": [str(e.path) for e in removed],
                "stale_cgroups": [str(g) for g in groups],
            }
        )
    else:
        _print_doctor(found, leases, ended, broken)
        _print_cache(cache, good, bad, removed)
        if groups:
            console.print(
                f"{len(groups)} stale pids cgroups of runners (--kill removes them): {groups[0]} ..."
            )
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
