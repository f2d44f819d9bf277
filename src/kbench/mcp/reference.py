"""What the tools tell of a problem's reference, from kbench.analysis: its fusion groups and roofline
(inspect), its speed-of-light on the GPU a verdict ran on (evaluate, submit), and its eager profile
(profile). The reference is the problem's own code, trusted: it runs in this process, never a candidate.

The eager profile runs the reference in this process on the verdict's device. torch's profiler is one
per process, so profiles run one at a time, and each (problem, preset, dtype, device) is profiled once
per server.
On a GPU the profile holds the device's timing lock (sandbox/timinglock.py) as a timing loop does: a
verdict's timing loop does not run beside it, unless the lock is held past that loop's wait.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Any

from kbench.config import RunConfig
from kbench.mcp.public import scrub
from kbench.types import Problem

if TYPE_CHECKING:
    from kbench.analysis.gpus import GPUSpec
    from kbench.analysis.inspect import InspectReport

PROFILE_ROWS = 15  # `kbench inspect`'s table: a level-3 model's eager forward runs 100+ distinct kernels
# a kernel's name, cut: cuBLAS and ATen kernels' template arguments run to 500+ characters
NAME_CHARS = 120
TIMING_WAIT_S = 60.0  # for a timing loop to end: one runs for `timing_budget_s` (5 s by default) at most
log = logging.getLogger(__name__)


def device_gpu(device: str) -> GPUSpec | None:
    """The table entry of the GPU behind `device`; None for the CPU or a GPU the table does not list."""
    if not device.startswith("cuda"):
        return None
    from kbench.analysis.gpus import match_device_name
    from kbench.hardware import device_name

    return match_device_name(device_name(device))


def roofline_gpu(device: str) -> tuple[GPUSpec, str]:
    """The GPU whose roofline a tool shows for `device`, and why that one when it is not the device's own:
    the kernels the benchmark is about run on a GPU, so elsewhere the speed-of-light is an H100's."""
    from kbench.analysis.gpus import get_gpu

    own = device_gpu(device)
    if own is not None:
        return own, ""
    where = "a GPU kbench's table does not list" if device.startswith("cuda") else "the CPU"
    return get_gpu("H100"), f"the candidate ran on {where}: an H100's roofline, no fraction of it is shown"


def sol_ms(problem: Problem, preset: str, dtype: str, device: str, cfg: RunConfig) -> float | None:
    """The problem's speed-of-light (analysis/roofline.py `SOL.sol_ms`, the figure `inspect` shows) on the
    GPU `device` is, or None: off a GPU (a CPU time against a GPU's roofline means nothing), on a GPU the
    table does not list, or when the count fails (logged; the verdict stands without it). The counts are
    kept where the evaluator's floor keeps them (evaluate/floor.py), so a first count is the only trace."""
    gpu = device_gpu(device)
    if gpu is None:
        return None
    from kbench.analysis.roofline import speed_of_light

    try:
        return speed_of_light(problem, preset, dtype, gpu, cache_dir=cfg.cache_dir / "flops").sol_ms
    except Exception:  # the count traces the reference on the meta device: any operator may refuse
        log.warning("%s: no speed-of-light count", problem.key, exc_info=True)
        return None


def fusion(p: Problem, cfg: RunConfig) -> dict[str, Any]:
    """The fusion groups of the problem's graph and its speed-of-light, on the CPU: no profile, no
    torch.compile (~15 s cold), no GPU. SOL is the detected GPU's, else an H100's."""
    from kbench.analysis.gpus import detect_gpu, get_gpu
    from kbench.analysis.inspect import inspect_problem

    gpu = detect_gpu() or get_gpu("H100")
    report = inspect_problem(
        p, gpu, preset=cfg.preset, device="cpu", dtype=cfg.dtype, compile=False, profile=False
    )
    return {
        "problem": p.key,
        "preset": cfg.preset,
        "fusion_groups": [g.to_dict() for g in report.graph.fusion_groups],
        "trace_error": scrub(report.graph.error),
        "roofline": roofline_view(report),
        "not_shown": "eager kernel profile and torch.compile fusions: the profile tool, or `kbench inspect`",
    }


def roofline_view(report: InspectReport) -> dict[str, Any]:
    sol = report.sol
    return {
        "gpu": sol.gpu,
        "gflop": sol.flops / 1e9,
        "min_bytes": sol.bytes,
        "flop_per_byte": sol.intensity,
        "bound": sol.bound,
        "sol_ms": sol.sol_ms,
    }


class Profiles:
    """The reference's eager profile and roofline per (problem, preset, dtype, device), made once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str, str, str], dict[str, Any]] = {}

    def reference(self, p: Problem, preset: str, dtype: str, device: str) -> dict[str, Any]:
        """{"roofline": ..., "reference_profile": ...} of the reference at `preset` on `device`."""
        key = (p.key, preset, dtype, device)
        with self._lock:
            kept = self._kept.get(key) or _profiled(p, preset, dtype, device)
            if kept is None:
                return {"reference_profile": {"unavailable": "the reference could not be profiled here"}}
            self._kept[key] = kept
            return kept


def _profiled(p: Problem, preset: str, dtype: str, device: str) -> dict[str, Any] | None:
    """The reference's roofline and eager table; None when inspecting it failed (logged)."""
    from kbench.analysis.inspect import inspect_problem

    gpu, why = roofline_gpu(device)
    window: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if device.startswith("cuda"):
        from kbench.sandbox import lease, timinglock

        window = timinglock.timing_window(lease.device_id(device), wait_s=TIMING_WAIT_S)
    try:
        with window:
            report = inspect_problem(p, gpu, preset=preset, device=device, dtype=dtype, compile=False)
    except Exception:  # the reference on a device and preset the problem was not tried at, an OOM
        log.warning("%s: the reference's profile failed", p.key, exc_info=True)
        return None
    roofline = roofline_view(report) | ({"note": why} if why else {})
    return {"roofline": roofline, "reference_profile": _table(report, dtype)}


def _table(report: InspectReport, dtype: str) -> dict[str, Any]:
    """The reference's eager forward: device kernels on a GPU, aten operators (CPU self time) on the CPU."""
    eager = report.eager
    assert eager is not None
    on_gpu = report.device.startswith("cuda")
    rows = eager.kernels if on_gpu else eager.ops
    table: dict[str, Any] = {
        "device": report.device,
        "rows_are": "device kernels, GPU time" if on_gpu else "aten operators, CPU self time",
        "profiled": "a few forwards in the server's process, under torch.profiler: compare shares, and the "
        "timed baselines_ms for times",
        "forward_ms": report.eager_ms,
        "launches": eager.kernel_launches,
        "rows": [
            {
                "name": r.name[:NAME_CHARS],
                "calls": r.calls,
                "ms": round(r.time_ms, 6),
                "share": round(r.share, 4),
            }
            for r in rows[:PROFILE_ROWS]
        ],
    }
    if len(rows) > PROFILE_ROWS:
        table["rows_not_shown"] = len(rows) - PROFILE_ROWS
    if dtype != "fp32":
        table["note"] = f"profiled in the dtypes the problem's file builds, not cast to {dtype}"
    return table
