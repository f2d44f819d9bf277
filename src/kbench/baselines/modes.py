"""The baseline modes: one registry for the reference worker, `kbench baseline` and upstream's JSON files.

Imported by the reference worker: it imports nothing but the standard library and kbench.errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kbench.errors import ConfigError


@dataclass(frozen=True)
class BaselineMode:
    name: str
    upstream_file: str  # upstream KernelBench times torch.compile per inductor mode in separate files
    timed: bool = True  # kbench's reference worker times it; else it is only imported and exported
    compile_mode: str | None = None  # torch.compile(mode=...); None: eager
    gpu_only: bool = False  # skipped on a CPU device


MODES = {
    m.name: m
    for m in (
        BaselineMode("eager", "baseline_time_torch.json"),
        BaselineMode("compile", "baseline_time_torch_compile_inductor_default.json", compile_mode="default"),
        BaselineMode(
            "compile-max-autotune",
            "baseline_time_torch_compile_inductor_max-autotune.json",
            compile_mode="max-autotune-no-cudagraphs",
            gpu_only=True,
        ),
        BaselineMode(
            "compile-max-autotune-no-cudagraphs",
            "baseline_time_torch_compile_inductor_max-autotune-no-cudagraphs.json",
            timed=False,
        ),
        BaselineMode(
            "compile-reduce-overhead",
            "baseline_time_torch_compile_inductor_reduce-overhead.json",
            timed=False,
        ),
    )
}
TIMED_MODES = tuple(name for name, m in MODES.items() if m.timed)

# A training problem's forward pass timed alone: its mode, the step's with this suffix ("eager:forward";
# the candidate's is "candidate:forward"). The backward's time is the step's less the forward's.
FORWARD = ":forward"


# The candidate's step with what its own kernels produce made NaN during the backward alone (the backward
# ablation, referee/candidate.py): gradients that still match came from other code than its kernels.
ABLATED_BACKWARD = "candidate:backward-ablated"


def forward_of(mode: str) -> str:
    return mode + FORWARD


def split_forward(name: str) -> tuple[str, bool]:
    """(the step's mode, whether `name` times the forward alone)."""
    return (name[: -len(FORWARD)], True) if name.endswith(FORWARD) else (name, False)


def check_modes(modes: Sequence[str], timed: bool = False) -> list[str]:
    """`modes` if all are registered (and, with `timed`, timed by kbench); else a ConfigError listing the
    valid names."""
    known = TIMED_MODES if timed else tuple(MODES)
    unknown = [m for m in modes if m not in known]
    if unknown or not modes:
        what = "timed baseline" if timed else "baseline"
        raise ConfigError(
            f"unknown {what} mode(s) {', '.join(unknown) or '(none)'}; known: {', '.join(known)}"
        )
    return list(modes)


def get_mode(name: str) -> BaselineMode:
    return MODES[check_modes([name], timed=True)[0]]


def compiles(modes: Sequence[str]) -> bool:
    """Whether any of `modes` times torch.compile (whose Inductor kernels are Triton's)."""
    return any(get_mode(m).compile_mode for m in modes)


def modes_for(modes: Sequence[str], on_gpu: bool) -> list[str]:
    """The modes of `modes` that run on this device (GPU-only ones are left out on a CPU; an unknown one is
    kept, for the reference worker to reject)."""
    return [m for m in modes if on_gpu or m not in MODES or not MODES[m].gpu_only]
