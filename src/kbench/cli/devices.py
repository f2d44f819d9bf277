"""Where a command evaluates (kbench.defaults decides; this module says so on stderr, once)."""

from __future__ import annotations

from rich.markup import escape

from kbench import defaults
from kbench.cli.app import err_console
from kbench.config import RunConfig

gpu_present = defaults.gpu_present


def apply_device_defaults(cfg: RunConfig, what: str = "evaluating") -> RunConfig:
    """`defaults.device_defaults`, its notice printed on stderr."""
    asked_cpu = cfg.device == "cpu"
    cfg, notice = defaults.device_defaults(cfg, what)
    if notice:
        err_console.print(f"[yellow]{cpu_reason(asked_cpu)}:[/] {escape(notice)}", highlight=False)
    return cfg


def cpu_reason(asked: bool) -> str:
    """Why an evaluation runs on the CPU: no GPU here, or `--device cpu` on a machine that has one."""
    from kbench.hardware import gpu_count

    return "on the CPU as asked" if asked and gpu_count() > 0 else "no GPU found"
