"""`kbench eval`: evaluate one candidate file against one problem and print the verdict.

Exit code 0 whenever the evaluation ran, whatever the verdict (a `mismatch` is a result, not a failure
of the command); 2 for kbench's own errors (bad flags, missing tools, a broken problem). The verdict comes
from the library's Evaluator (api/evaluator.py) on its cold path for one candidate: the build beside the
reference run, no run recorded; baselines stored in the configured results database (when the file
exists) are reused as in `kbench run` (store/reuse.py).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape
from rich.table import Table

from kbench.cli.app import Format, app, console, err_console, print_json, skip_teardown
from kbench.cli.devices import apply_device_defaults
from kbench.cli.generate import BACKENDS
from kbench.cli.progress import speedup_text
from kbench.errors import ConfigError
from kbench.report import passes
from kbench.types import Problem, TimingStats, Verdict

if TYPE_CHECKING:
    from kbench.config import RunConfig


def verdict_dict(v: Verdict) -> dict[str, Any]:
    data = asdict(v)
    data["status"] = v.status.value
    data["speedup"] = {mode: v.speedup(mode) for mode, _ in v.baselines}
    return data


def _fmt_ms(stats: TimingStats | None) -> str:
    if stats is None:
        return "-"
    note = "" if stats.meaningful else " (not meaningful)"
    stored_at = stats.provenance.stored_at if stats.provenance is not None else ""
    note += f" (stored {stored_at})" if stored_at else ""
    return f"{stats.median_ms:.4g} ms ± {100 * stats.rse:.2g}% (IQR {stats.iqr_ms:.3g}, n={stats.n}){note}"


def print_verdict(v: Verdict) -> None:
    color = "green" if v.ok else "red"
    table = Table(title=f"{v.problem_key}  [{color}]{v.status.value}[/]", show_header=False)
    table.add_row("backend / device", f"{v.backend} / {v.device}  ({v.dtype}, preset {v.preset})")
    if v.rule:
        table.add_row("rule", v.rule)
    if v.message:
        table.add_row("message", escape(v.message[-1500:]))  # a compiler's message is text, not markup
    if v.correctness is not None:
        c = v.correctness
        table.add_row(
            "error",
            f"max abs {c.max_abs_err:.3g}, mean abs {c.mean_abs_err:.3g}, max rel {c.max_rel_err:.3g}",
        )
    table.add_row("candidate", _fmt_ms(v.timing))
    for mode, stats in v.baselines:
        speed = speedup_text(v, mode)
        table.add_row(mode, _fmt_ms(stats) + (f"   speedup {speed.strip()}" if speed else ""))
    for line in passes.pass_lines(v):  # a training step's passes
        name, _, rest = line.partition(" ")
        table.add_row(name, rest)
    if v.kernel_share is not None:
        table.add_row("own-kernel share", f"{100 * v.kernel_share:.1f}% of device time")
    if v.build is not None:
        how = "cache hit" if v.build.cache_hit else v.build.recipe
        table.add_row("build", f"{v.build.seconds:.1f} s" + (f" ({how})" if how else ""))
    if v.generalizes is not None or v.hidden:
        table.add_row("generalizes", f"{v.generalizes} ({v.hidden})" if v.hidden else str(v.generalizes))
    for w in v.warnings:
        table.add_row("warning", escape(w))
    table.add_row("wall time", f"{v.seconds:.1f} s")
    console.print(table)
    if not v.ok and v.log_tail:
        console.print("[dim]log tail:[/]")
        console.print(v.log_tail, highlight=False, markup=False)


def _at_preset_used(address: str, cfg: RunConfig) -> tuple[Problem, RunConfig]:
    """The problem, and `cfg` at the preset it runs at: the one asked for, or `full` (its file's own
    sizes) when it has none of that name, said on stderr in `kbench run`'s words (the verdict names the
    preset that ran); a mistyped preset is an error."""
    from kbench.problems import get_problem
    from kbench.problems.loader import check_preset, preset_note, preset_used

    problem = get_problem(address, cfg.source)
    check_preset([problem], cfg.preset)
    note = preset_note(problem, cfg.preset)
    if note:
        err_console.print(f"note: {escape(note)}", highlight=False, soft_wrap=True)
    return problem, cfg.model_copy(update={"preset": preset_used(problem, cfg.preset)})


def prewarm_starter(cfg: RunConfig, one_shot: bool = False) -> None:
    """Start the warm starter before this process imports torch (api.prewarm)."""
    from kbench.api import prewarm

    prewarm(cfg, one_shot)


@app.command("eval")
def eval_cmd(
    problem: str = typer.Option(
        ..., "--problem", "-p", help="SOURCE:LEVEL/ID, LEVEL/ID, a name or a problem file"
    ),
    candidate: Path = typer.Option(..., "--candidate", "-c", help="Python file defining ModelNew"),
    backend: str | None = typer.Option(
        None, "--backend", "-b", help=f"{BACKENDS} (default: cuda, or cpp without a GPU)"
    ),
    dtype: str | None = typer.Option(None, "--dtype", help="fp32 | fp16 | bf16"),
    preset: str | None = typer.Option(None, "--preset", help="shape preset, e.g. full or small"),
    device: str | None = typer.Option(None, "--device", help="auto | cpu | cuda | cuda:N"),
    timeout: float | None = typer.Option(None, "--timeout", help="wall-clock limit of the candidate (s)"),
    no_static: bool = typer.Option(False, "--no-static", help="skip the static (AST) checks"),
    no_timing: bool = typer.Option(False, "--no-timing", help="correctness and protocol checks only"),
    hidden_shapes: bool = typer.Option(
        False, "--hidden-shapes", help="an ok candidate is also checked at sizes drawn now, never shown"
    ),
    config: Path | None = typer.Option(None, "--config", help="TOML/JSON run config"),
    source: str | None = typer.Option(None, "--source", "-s", help="problem source (default: kbench)"),
    fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
) -> None:
    """Evaluate one candidate: status, rule, error, times and speedups vs eager and torch.compile."""
    from kbench.config import resolve

    flags = {
        "backend": backend,
        "dtype": dtype,
        "preset": preset,
        "device": device,
        "timeout_s": timeout,
        "source": source,
    }
    if no_static:
        flags["static_checks"] = False
    if no_timing:
        flags["measure"] = False
    if hidden_shapes:
        flags["hidden_shapes"] = True
    cfg = resolve(config, flags)
    # First: the starter's torch import (the longest step of a cold verdict) then overlaps this process's
    # own, which the GPU check below begins.
    prewarm_starter(cfg, one_shot=True)
    cfg = apply_device_defaults(cfg)  # without a GPU: cpp, small, said on stderr
    chosen, cfg = _at_preset_used(problem, cfg)
    try:
        text = candidate.read_text()
    except OSError as exc:
        raise ConfigError(f"{candidate}: cannot read candidate file ({exc.strerror})") from None
    from kbench.api import Evaluator, EvaluatorOptions, Submission
    from kbench.sandbox.procs import age

    one = EvaluatorOptions(record=False, share_references=False, build_ahead=False)
    with Evaluator(cfg, one) as evaluator:
        # The command's own start (interpreter, imports) is part of the verdict's seconds: phase `cli`.
        verdict = evaluator.submit(Submission(chosen, text, before_s=age())).verdict()
    if fmt is Format.json:
        print_json(verdict_dict(verdict))
    else:
        print_verdict(verdict)
    skip_teardown()  # the verdict is out: the process ends at once (cli.main)
