"""`kbench runs`, `kbench report`, `kbench export` and `kbench baseline`: results and reference timings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich import box
from rich.markup import escape
from rich.table import Table

from kbench.cli.app import Format, app, console, err_console, print_json
from kbench.errors import ConfigError
from kbench.store import RunInfo, Store

if TYPE_CHECKING:
    from kbench.baselines.storage import BaselineOutcome, Timer, Where


def open_store(path: Path | None) -> Store:
    from kbench.config import resolve

    return Store(resolve(flags={"store": path}).store)


def resolve_runs(store: Store, runs: list[str]) -> list[str]:
    """Run ids as given; `latest` names the most recent run."""
    known = store.runs()
    if not known:
        raise ConfigError(f"{store.path} holds no runs yet; start one with `kbench run`")
    return [known[-1].run_id if r == "latest" else store.run(r).run_id for r in runs]


STORE_OPT = typer.Option(None, "--store", help="results database (default: config `store`)")
PROTOCOLS_OPT = typer.Option(
    "kbench,kernelbench",
    "--protocol",
    help="whose fast_p rules the report applies, comma-separated: kbench (median speedups, 95 % interval, "
    "noise floor) and/or kernelbench (upstream's: mean speedup > p); correctness is always the run's own",
)
THRESHOLDS_OPT = typer.Option(
    "0,0.5,0.8,1,1.5,2", "--p", help="the fast_p thresholds of the per-level tables (upstream's by default)"
)
KS_OPT = typer.Option(None, "--k", help="the k of pass@k and fast_p@k, comma-separated (default: 1 and n)")


@app.command("runs")
def runs_cmd(
    store_path: Path | None = STORE_OPT, fmt: Format = typer.Option(Format.table, "--format")
) -> None:
    """List the runs in the results database."""
    store = open_store(store_path)
    runs = store.runs()
    if fmt is Format.json:
        print_json(
            [
                {k: getattr(r, k) for k in ("run_id", "created_at", "fingerprint", "verdicts", "ok")}
                | dict(zip(("model", "backend", "preset", "device"), _run_cells(r), strict=True))
                for r in runs
            ]
        )
        return
    table = Table(title=f"{len(runs)} runs in {store.path}", box=box.SIMPLE_HEAD)
    # Ids are what the user types next (`report`, `--resume`): never cut or wrapped; other columns fold.
    # An id starts with its UTC start time (`--format json` has `created_at`).
    table.add_column("run", no_wrap=True, min_width=max((len(r.run_id) for r in runs), default=3))
    for col in ("model", "backend", "preset", "device"):
        table.add_column(col, overflow="fold")
    table.add_column("ok", justify="right")
    for r in runs:
        table.add_row(r.run_id, *_run_cells(r), f"{r.ok}/{r.verdicts}")
    console.print(table)


def _gpu_backend(name: str) -> bool:
    """Whether a stored run's backend runs its kernels on a GPU (one no longer registered: taken to)."""
    from kbench.backends import get_backend

    try:
        return get_backend(name).gpu_kernels
    except ConfigError:
        return True


def _run_cells(r: RunInfo) -> list[str]:
    """Model and backend as the verdicts have them (the shipped solutions' run stores no model), else as
    configured; the preset; the device the verdicts ran on (`--format json` has the whole hardware)."""
    model = ", ".join(r.models) or str(r.config.get("model") or "–")
    backend = ", ".join(r.backends) or str(r.config.get("backend", ""))
    cpu = (
        str(r.config.get("device")) == "cpu"
        or not any(map(_gpu_backend, r.backends))
        or not r.hardware.get("gpu")
    )
    return [model, backend, str(r.config.get("preset", "")), "CPU" if cpu else str(r.hardware["gpu"])]


@app.command("report")
def report_cmd(
    runs: list[str] = typer.Argument(
        ..., help="run ids (or `latest`); several runs are compared side by side"
    ),
    store_path: Path | None = STORE_OPT,
    out: Path | None = typer.Option(None, "--out", "-o", help="HTML file (default: next to the database)"),
    html: bool = typer.Option(True, "--html/--no-html", help="also write the self-contained HTML report"),
    noise_floor: float | None = typer.Option(
        None, "--noise-floor", min=0.0, help="speedup spread counted as noise (default: each run's own, 0.01)"
    ),
    generalizes: str | None = typer.Option(
        None, "--generalizes", help="only verdicts whose hidden-shape check says: yes | no | unchecked"
    ),
    protocol: str = PROTOCOLS_OPT,
    thresholds: str = THRESHOLDS_OPT,
    ks: str | None = KS_OPT,
) -> None:
    """Summarise runs in the terminal and write one self-contained HTML report."""
    from kbench.report import load_series, print_summary, write_html
    from kbench.report.data import parse_options

    options = parse_options(protocol, thresholds, ks)
    store = open_store(store_path)
    ids = resolve_runs(store, runs)
    print_summary(load_series(store, ids, noise_floor, generalizes), console, options)
    if html:
        name = f"report-{ids[0]}" + (f"-and-{len(ids) - 1}-more" if len(ids) > 1 else "") + ".html"
        path = write_html(store, ids, out or store.path.parent / name, noise_floor, generalizes, options)
        console.print(f"HTML report: {path}")


def _turn(text: str) -> int | None:
    if text == "last":
        return None
    if not text.isdigit():
        raise ConfigError(f"--turn: a turn number or `last`, got {text!r}")
    return int(text)


@app.command("export")
def export_cmd(
    run: str = typer.Argument(..., help="run id (or `latest`)"),
    fmt: str = typer.Option(
        "jsonl",
        "--format",
        help="jsonl (full records) | csv (one flat row per verdict) | kernelbench (upstream KernelBench's "
        "eval_results.json, pass_at_k_results.json, kernels and baseline files, into the folder --out)",
    ),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="file to write (default: stdout); a folder for kernelbench"
    ),
    turn: str = typer.Option(
        "0", "--turn", help="kernelbench: the turn that stands for a sample (N or `last`)"
    ),
    ks: str | None = typer.Option(None, "--k", help="kernelbench: the k of pass@k (default: 1 and n)"),
    store_path: Path | None = STORE_OPT,
) -> None:
    """Export a run's verdicts as JSON Lines, CSV, or upstream KernelBench's result files."""
    from kbench.report.data import parse_ks
    from kbench.store.export import Context, to_csv, to_jsonl

    writers = {"jsonl": to_jsonl, "csv": to_csv, "kernelbench": None}
    if fmt not in writers:
        raise ConfigError(f"unknown export format {fmt!r}; use one of: {', '.join(writers)}")
    store = open_store(store_path)
    [run_id] = resolve_runs(store, [run])
    write = writers[fmt]
    if write is None:
        _export_kernelbench(store, run_id, out, _turn(turn), parse_ks(ks) or ())
        return
    _warn(store, run_id)
    ctx = Context.of(store, run_id)
    text = write(store.records(run_id), ctx)
    if out is None:
        typer.echo(text, nl=False)
    else:
        out.write_text(text)
        console.print(f"wrote {out}")


def _warn(store: Store, run_id: str) -> None:
    """The report's warnings about the run (incomplete, models not alike), on stderr: an export of an
    incomplete run holds only the verdicts there are, and its file must stay clean."""
    from kbench.report import load_series
    from kbench.report.state import warnings

    for line in warnings(load_series(store, [run_id])):
        err_console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _export_kernelbench(
    store: Store, run_id: str, out: Path | None, turn: int | None, ks: Sequence[int]
) -> None:
    from kbench.report.upstream import export

    if out is None:
        raise ConfigError("--format kernelbench writes several files: name their folder with --out")
    _warn(store, run_id)
    written = export(store, run_id, out, turn, ks)
    console.print(
        f"wrote {len(written)} files under {out} (and each sample's kernel beside its eval_results.json)"
    )


def reference_timer() -> Timer:
    """The evaluator's reference timer (the trusted reference worker), imported when needed."""
    from kbench.evaluate.baselines import time_baselines

    return time_baselines


def _where(
    preset: str, dtype: str, fingerprint: str | None, torch_version: str | None, upstream: str = ""
) -> Where:
    from kbench.baselines.storage import Where

    if upstream:  # imported timings come from another machine unless the user says otherwise
        return Where(preset, dtype, fingerprint or f"upstream:{upstream}", torch_version or "upstream")
    from kbench.hardware import environment
    from kbench.hardware import fingerprint as this_fingerprint

    return Where(
        preset, dtype, fingerprint or this_fingerprint(), torch_version or str(environment()["torch"])
    )


def _print_outcomes(outcomes: Sequence[BaselineOutcome]) -> None:
    table = Table(title="baselines")
    for col in ("problem", "mode", "median ms", "rse", "n", "method", ""):
        table.add_column(col)
    for o in outcomes:
        s = o.stats
        table.add_row(
            o.problem_key,
            o.mode,
            f"{s.median_ms:.4g}",
            f"{s.rse:.2%}",
            str(s.n),
            s.method,
            "stored" if o.reused else "measured",
        )
    console.print(table)


@app.command("baseline")
def baseline_cmd(
    problems: list[str] = typer.Argument(None, help="problem addresses (default: the whole source/level)"),
    source: str = typer.Option("kbench", "--source", "-s"),
    level: int | None = typer.Option(None, "--level", "-l"),
    modes: str = typer.Option("eager,compile", "--modes", help="eager,compile,compile-max-autotune,..."),
    preset: str = typer.Option("full", "--preset", "-p"),
    dtype: str = typer.Option("fp32", "--dtype"),
    force: bool = typer.Option(False, "--force", help="re-time even where a baseline is stored"),
    import_json: Path | None = typer.Option(None, "--import", help="upstream baseline_time_*.json to import"),
    import_source: str = typer.Option("hf", "--import-source", help="problem source the imported keys name"),
    export_dir: Path | None = typer.Option(
        None, "--export", help="folder to write upstream-shaped JSON into"
    ),
    hardware: str = typer.Option("", "--hardware", help="hardware name written into exported JSON"),
    fingerprint: str | None = typer.Option(None, "--fingerprint", help="store/read under this fingerprint"),
    torch_version: str | None = typer.Option(None, "--torch-version", help="store/read under this torch"),
    store_path: Path | None = STORE_OPT,
) -> None:
    """Time reference problems (eager, torch.compile modes) and store the baselines; import/export upstream JSON.

    Imported timings are stored under fingerprint `upstream:<folder>` and torch `upstream` unless
    --fingerprint/--torch-version say they match this machine (`kbench env` shows its fingerprint).
    """
    from kbench.baselines import storage as b
    from kbench.problems import select

    store = open_store(store_path)
    mode_list = b.check_modes([m.strip() for m in modes.split(",") if m.strip()])
    if import_json is not None:
        where = _where(preset, dtype, fingerprint, torch_version, upstream=import_json.resolve().parent.name)
        mode = b.mode_of(import_json) if import_json.name in b.UPSTREAM_FILES.values() else mode_list[0]
        count = b.import_upstream(store, import_json, where, source=import_source, mode=mode)
        console.print(f"imported {count} {mode} baselines under fingerprint {where.fingerprint}")
        return
    where = _where(preset, dtype, fingerprint, torch_version)
    if export_dir is not None:
        paths = b.export_upstream(store, export_dir, where, hardware or where.fingerprint, mode_list)
        console.print("\n".join(f"wrote {p}" for p in paths) or "no stored baselines match")
        return
    chosen = select(source, level=level, ids=problems or None)
    store.put_problems(chosen)
    _print_outcomes(b.measure(store, chosen, mode_list, reference_timer(), where, force=force))
