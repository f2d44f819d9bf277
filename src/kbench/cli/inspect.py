"""`kbench inspect`: what eager runs, what torch.compile fuses, and how fast the problem could run."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from kbench.cli.app import Format, app, console, err_console, print_json
from kbench.errors import ConfigError
from kbench.problems import get_problem, select
from kbench.verify import checked_device


def _gpu(name: str | None, measure: bool):  # type: ignore[no-untyped-def]
    """The GPU whose roofline the speed-of-light is computed on, and why that one when it was not asked for
    and is not this machine's (no GPU here: the kernels the benchmark is about run on a GPU, so SOL is a
    GPU's, by default an H100's)."""
    from kbench.analysis.ceilings import measure_ceilings
    from kbench.analysis.gpus import detect_gpu, get_gpu

    if measure:
        return measure_ceilings(), ""
    if name:
        return get_gpu(name), ""
    detected = detect_gpu()
    if detected:
        return detected, ""
    return get_gpu(
        "H100"
    ), "no GPU here: SOL is an H100's, the kind of GPU the kernels are for (--gpu NAME picks another)"


def _shard(text: str) -> tuple[int, None, int]:
    """`I/N` -> the slice start/stop/step of shard I of N."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError(f"--shard {text!r}: expected I/N, e.g. 0/4") from None
    if count < 1 or not 0 <= index < count:
        raise ConfigError(f"--shard {text!r}: need 0 <= I < N")
    return index, None, count


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _show(report, why: str) -> None:  # type: ignore[no-untyped-def]
    sol = report.sol
    console.print(
        f"[bold]{report.problem_key} {report.name}[/] preset={report.preset} device={report.device}"
    )
    console.print(
        f"roofline on {sol.gpu} ({sol.dtype}): {sol.flops / 1e9:.3f} GFLOP, {_fmt_bytes(sol.bytes)} min moved, "
        f"intensity {sol.intensity:.1f} FLOP/B, SOL {sol.sol_ms:.4f} ms ({sol.bound}-bound)"
    )
    if report.forward_sol is not None:  # a training problem: `sol` is its step's
        fwd = report.forward_sol
        console.print(
            f"  training step: forward SOL {fwd.sol_ms:.4f} ms ({fwd.bound}-bound), backward at least "
            f"{max(sol.sol_ms - fwd.sol_ms, 0.0):.4f} ms (the step's less the forward's)"
        )
    if why:
        console.print(f"  {why}", highlight=False, markup=False)
    groups = Table(title=f"fusion groups ({len(report.graph.fusion_groups)}) {report.graph.error}")
    for col in ("kind", "ops", "intermediates skipped", "bytes saved"):
        groups.add_column(col)
    for g in report.graph.groups:
        inter = ", ".join(n for n, _ in g.intermediates)
        groups.add_row(g.kind, " -> ".join(g.ops), inter, _fmt_bytes(g.bytes_saved))
    console.print(groups)
    if report.eager:
        rows = report.eager.kernels or report.eager.ops
        table = Table(title=f"eager: {report.eager.kernel_launches:g} launches per forward")
        for col in ("op/kernel", "calls", "ms", "share"):
            table.add_column(col)
        for r in rows[:15]:
            table.add_row(r.name[:80], f"{r.calls:g}", f"{r.time_ms:.4f}", f"{r.share:.1%}")
        console.print(table)
    if report.compiled:
        c = report.compiled
        console.print(
            f"torch.compile: {c.nodes_before} -> {c.nodes_after} scheduler nodes, {c.launch_count} launches"
            + ("" if c.kernel_ms is None else f", kernels {c.kernel_ms:.4f} ms per forward")
        )
        console.print("  fusions: " + ("; ".join(c.fusions) or "none"))
        console.print("  kernels: " + (", ".join(c.kernels) or "none"))


def _table_row(report) -> str:  # type: ignore[no-untyped-def]
    s, c = report.sol, report.compiled
    eager = "-" if report.eager_ms is None else f"{report.eager_ms:.4f}"
    ratio = "-" if report.eager_ms is None or not s.sol_ms else f"{report.eager_ms / s.sol_ms:.2f}"
    compiled_ms = None if c is None else c.kernel_ms
    compiled = "-" if compiled_ms is None else f"{compiled_ms:.4f}"
    gain = "-" if not compiled_ms or report.eager_ms is None else f"{report.eager_ms / compiled_ms:.2f}"
    cells = [report.problem_key, report.name, f"{s.flops / 1e9:.3f}", f"{s.bytes / 2**20:.2f}", f"{s.intensity:.1f}",
             s.bound, f"{s.sol_ms:.4f}", eager, ratio, str(len(report.graph.fusion_groups)),
             f"{report.graph.bytes_saved / 2**20:.2f}", f"{report.eager.kernel_launches:g}" if report.eager else "-",
             str(c.launch_count) if c else "-", compiled, gain]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


HEADER = ("| key | name | GFLOP | min MiB | FLOP/B | bound | SOL ms | eager ms | eager/SOL | fusion groups "
          "| MiB saved | eager launches | compiled launches | compiled ms | eager/compiled |")  # fmt: skip


@app.command("inspect")
def inspect_cmd(
    problem: str = typer.Argument(None, help="SOURCE:LEVEL/ID, LEVEL/ID or a name (omit with --all)"),
    preset: str = typer.Option("small", "--preset", "-p"),
    device: str = typer.Option("auto", "--device", "-d", help="auto | cpu | cuda"),
    gpu: str | None = typer.Option(None, "--gpu", help="GPU for SOL: H100, H200, A100, L40S, L4, ..."),
    dtype: str = typer.Option("fp32", "--dtype", help="fp32 | fp16 | bf16"),
    measure: bool = typer.Option(False, "--measure-ceilings", help="SOL from a measured copy and matmul"),
    compile: bool = typer.Option(
        True, "--compile/--no-compile", help="run torch.compile (~15 s cold on CPU)"
    ),
    all_: bool = typer.Option(False, "--all", help="inspect every problem of --source/--level"),
    source: str = typer.Option("kbench", "--source", "-s"),
    level: int | None = typer.Option(None, "--level", "-l"),
    out: Path | None = typer.Option(None, "--out", help="with --all: write the Markdown table here"),
    shard: str | None = typer.Option(
        None, "--shard", help="I/N: with --all, only problems I, I+N, I+2N, ... (0-based; parallel runs)"
    ),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Eager ops and kernels, torch.compile fusions, fusion groups and speed-of-light for a problem."""
    from kbench.analysis.inspect import inspect_problem

    if not all_ and not problem:
        raise ConfigError("name a PROBLEM, or pass --all (with --level) to inspect a whole level")
    dev = checked_device(device)
    spec, why = _gpu(gpu, measure)
    problems = select(source, level=level) if all_ else [get_problem(problem, source)]
    if shard:
        problems = problems[slice(*_shard(shard))]
    reports = []
    for p in problems:
        reports.append(inspect_problem(p, spec, preset=preset, device=dev, dtype=dtype, compile=compile))
        if all_:
            err_console.print(f"inspected {p.key} {p.name}", highlight=False)
    if all_:
        separator = "|" + "---|" * (HEADER.count("|") - 1)
        title = f"SOL on {spec.name} ({dtype}), preset {preset}, device {dev}" + (f"; {why}" if why else "")
        lines = [title, "", HEADER, separator]
        lines += [_table_row(r) for r in reports]
        text = "\n".join(lines) + "\n"
        if out:
            out.write_text(text)
    if fmt is Format.json:
        print_json([r.to_dict() for r in reports] if all_ else reports[0].to_dict())
    elif all_:
        console.print(text, highlight=False)
    else:
        _show(reports[0], why)
