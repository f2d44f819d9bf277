"""Which of the candidate's own kernels ran during one forward (rule `no-custom-kernel`), worker side.

On a GPU, torch.profiler lists the device kernels that ran; a kernel is the candidate's when its name
starts with a name the candidate defines (`__global__` names, `@triton.jit` names), at an identifier
boundary (`void my_kernel<float>(...)` matches `my_kernel`). On the CPU, the recorder counts calls of the
functions exported by the candidate's extensions and of interpreted Triton kernels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kbench.backends import KernelRecorder


@dataclass(frozen=True)
class KernelUse:
    ran: tuple[str, ...]  # the candidate's kernels/functions that ran
    share: float | None  # share of device time in the candidate's kernels (GPU only)
    library: tuple[str, ...] = ()  # other device kernels that ran (first few)


def _matcher(names: Iterable[str]) -> re.Pattern[str] | None:
    names = sorted({n for n in names if n}, key=len, reverse=True)
    if not names:
        return None
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9])")


def gpu_kernels(forward: Callable[[], Any], names: Iterable[str]) -> KernelUse:
    import torch
    from torch.autograd.profiler import profile

    # The autograd profiler that torch.profiler.profile drives, used directly: the latter's start asks
    # `hasattr(torch, "_inductor")`, which imports torch._inductor and torch._dynamo (2-3 s of a GPU
    # worker's time, the longest step of a cold candidate's start-up when it was imported up front).
    with profile(use_cpu=True, use_device="cuda", use_kineto=True) as prof:
        forward()
        torch.cuda.synchronize()
    pattern = _matcher(names)
    ours: dict[str, float] = {}
    others: dict[str, float] = {}
    for evt in prof.function_events:
        if evt.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = float(evt.time_range.elapsed_us())
        m = pattern.search(evt.name) if pattern else None
        bucket, key = (ours, m.group(1)) if m else (others, evt.name)
        bucket[key] = bucket.get(key, 0.0) + us
    total = sum(ours.values()) + sum(others.values())
    share = sum(ours.values()) / total if total > 0 else None
    return KernelUse(tuple(sorted(ours)), share, tuple(sorted(others))[:10])


def cpu_calls(forward: Callable[[], Any], recorder: KernelRecorder) -> KernelUse:
    recorder.calls.clear()
    forward()
    return KernelUse(tuple(sorted(n for n, c in recorder.calls.items() if c > 0)), None)
