"""Where a command evaluates (kbench.defaults decides; this module says so on stderr, once)."""

from __future__ import annotations

from kbench import defaults
from kbench.cli.app import err_console
from kbench.config import RunConfig

gpu_present = defaults.gpu_present


def device_defaults(cfg: RunConfig, what: str = "evaluating") -> RunConfig:
    """`defaults.device_defaults`, its notice printed on stderr."""
    cfg, notice = defaults.device_defaults(cfg, what)
    if notice:
        err_console.print(f"[yellow]no GPU found:[/] {notice}", highlight=False)
    return cfg
