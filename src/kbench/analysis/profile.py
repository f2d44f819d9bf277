"""Eager view: the operators (and, on GPU, the device kernels) one forward runs, from torch.profiler."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

# On CPU there are no kernels; "launches" counts the aten operators that compute, i.e. not these views,
# allocations and composite wrappers (aten::linear only dispatches to aten::addmm).
_NOT_LAUNCHES = {
    "empty", "empty_strided", "as_strided", "view", "_unsafe_view", "reshape", "t", "transpose", "permute",
    "expand", "resolve_conj", "resolve_neg", "unsqueeze", "squeeze", "select", "slice", "detach", "alias",
    "linear", "layer_norm", "conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "batch_norm", "_batch_norm_impl_index", "group_norm",
    "instance_norm", "matmul", "softmax", "log_softmax", "dropout", "flatten", "contiguous", "to", "lift_fresh",
}  # fmt: skip
# What the profiler's native library (Kineto) writes straight to file descriptor 2 at each start and stop,
# whatever its log level: `USDT:2026-12-05 07:38:07 10093:10093 SyncActivityProfilerHandler.cpp:52]
# profiler_start`, and `STAGE:... Completed Stage: Warm Up`.
_PROFILER_LOG = re.compile(r"^(USDT|STAGE):\d{4}-\d\d-\d\d ")
PROFILED_ITERS = 3  # forwards averaged; one warm-up forward runs before (allocator and cuDNN set-up)


@dataclass(frozen=True)
class OpRow:
    name: str
    calls: float  # per forward
    time_ms: float  # self time per forward
    share: float  # of the total self time per forward


@dataclass
class EagerProfile:
    device: str
    ops: list[OpRow] = field(default_factory=list)  # aten operators (CPU side)
    kernels: list[OpRow] = field(default_factory=list)  # device kernels (GPU only)
    kernel_launches: float = 0.0  # per forward; on CPU the count of aten operators that did work

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rows(events: list[Any], attr: str, iters: int) -> list[OpRow]:
    times = {e.key: getattr(e, attr) / 1e3 / iters for e in events}  # profiler times are microseconds
    total = sum(times.values()) or 1.0
    rows = [
        OpRow(e.key, e.count / iters, times[e.key], times[e.key] / total) for e in events if times[e.key] > 0
    ]
    return sorted(rows, key=lambda r: -r.time_ms)


@contextmanager
def _without_profiler_log() -> Iterator[None]:
    """Keep the profiler's own log lines out of kbench's output: file descriptor 2 goes to a temporary file
    while the profiler runs (its library writes there, past `sys.stderr`), then every other line written
    meanwhile is passed on."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines = caught.read().decode(errors="replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _PROFILER_LOG.match(line))
            if kept:
                sys.stderr.write(kept)
                sys.stderr.flush()


def profile_eager(model: Any, inputs: list[Any], device: str) -> EagerProfile:
    """Profile PROFILED_ITERS forwards; per-forward self times, shares and launch counts."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch.no_grad():
        model(*inputs)
        if cuda:
            torch.cuda.synchronize()
        with _without_profiler_log(), profile(activities=activities) as prof:
            for _ in range(PROFILED_ITERS):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize()
    events = list(prof.key_averages())
    cpu_ops = [e for e in events if e.key.startswith("aten::") and e.self_cpu_time_total > 0]
    view = EagerProfile(device=device, ops=_rows(cpu_ops, "self_cpu_time_total", PROFILED_ITERS))
    if cuda:
        kernels = [e for e in events if e.self_device_time_total > 0 and not e.key.startswith("aten::")]
        view.kernels = _rows(kernels, "self_device_time_total", PROFILED_ITERS)
        view.kernel_launches = sum(r.calls for r in view.kernels)
    else:
        view.kernel_launches = sum(r.calls for r in view.ops if r.name[len("aten::") :] not in _NOT_LAUNCHES)
    return view
