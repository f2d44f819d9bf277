"""Measured ceilings: the bandwidth and matmul rates this GPU actually reaches, as a GPUSpec for SOL.

Datasheet peaks are rarely reached (HBM copies get ~85-90 % of the headline bandwidth), so SOL on measured
ceilings is the tighter, fairer bound for "how close to the hardware is this kernel".
"""

from __future__ import annotations

import dataclasses

from kbench.analysis.gpus import GPUSpec, detect_gpu
from kbench.errors import ConfigError

COPY_BYTES = 2**30  # 1 GiB each way: far past any L2 (50 MB on H100/H200), so it measures HBM
MATMUL_N = 8192  # 8192^3 matmuls run long enough (~1 ms at 1 PFLOP/s) to reach the peak clock
REPEATS = 10


def _time_ms(fn, repeats: int = REPEATS) -> float:  # type: ignore[no-untyped-def]
    import torch

    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def _matmul_tflops(dtype_name: str, tf32: bool) -> float:
    import torch

    dtype = getattr(torch, dtype_name)
    a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
    b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=dtype)
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        ms = _time_ms(lambda: torch.mm(a, b))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return 2 * MATMUL_N**3 / (ms * 1e-3) / 1e12


def measure_ceilings() -> GPUSpec:
    """Copy and matmul on CUDA device 0; returns a spec whose rates are the measured ones."""
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("--measure-ceilings needs a CUDA GPU; use --gpu NAME for datasheet peaks instead")
    src = torch.empty(COPY_BYTES // 4, device="cuda", dtype=torch.float32)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src))
    bandwidth = 2 * COPY_BYTES / (copy_ms * 1e-3) / 1e9  # read + write
    src = dst = torch.empty(0)  # free the 2 GiB before the matmuls
    base = detect_gpu()
    props = torch.cuda.get_device_properties(0)
    spec = GPUSpec(
        name=f"{torch.cuda.get_device_name(0)} (measured)",
        memory_bandwidth_gbs=bandwidth,
        fp32_tflops=_matmul_tflops("float32", tf32=False),
        tf32_tflops=_matmul_tflops("float32", tf32=True),
        fp16_tflops=_matmul_tflops("float16", tf32=False),
        bf16_tflops=_matmul_tflops("bfloat16", tf32=False),
        sm_count=props.multi_processor_count,
        smem_per_sm_kb=base.smem_per_sm_kb if base else 0,
        l2_mb=base.l2_mb if base else 0.0,
        memory_gb=round(props.total_memory / 1e9, 1),
        source=f"measured: {COPY_BYTES >> 20} MiB copy, {MATMUL_N}^3 matmuls, median of {REPEATS}",
    )
    return dataclasses.replace(spec)
