"""Eager view: the operators (and, on GPU, the device kernels) one forward runs, from torch.profiler."""

from __future__ import annotations

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
        with profile(activities=activities) as prof:
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
