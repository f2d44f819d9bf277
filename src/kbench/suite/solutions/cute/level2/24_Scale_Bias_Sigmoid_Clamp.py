"""Per-feature scale and bias, sigmoid and clamp as one CuTe DSL elementwise kernel.

A 2-D grid: blockIdx.y is the row, each 256-thread CTA covers 1024 columns of it, every thread four
columns 256 apart (so each of the four loads of a warp is one coalesced 128-byte line). Columns past dim
are masked. sigmoid is 1 / (1 + exp(-v)) in fp32. Compiled once per input shape with `cute.compile`;
compiles for sm_90a without a GPU, runs only on one.
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256
PER = 4  # columns per thread: 1024 per CTA, so the 8192-wide rows of the full preset take 8 CTAs
LO = 0.1
HI = 0.9


@cute.kernel
def scale_bias_sigmoid_clamp_kernel(gx: cute.Tensor, gs: cute.Tensor, gb: cute.Tensor, gy: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    dim = gx.shape[1]
    for j in cutlass.range_constexpr(PER):
        col = bx * (THREADS * PER) + j * THREADS + tidx
        if col < dim:
            v = gx[row, col] * gs[col] + gb[col]
            sig = 1.0 / (1.0 + cute.math.exp(-v))
            gy[row, col] = cute.arch.fmin(cute.arch.fmax(sig, cutlass.Float32(LO)), cutlass.Float32(HI))


@cute.jit
def scale_bias_sigmoid_clamp(
    mx: cute.Tensor, ms: cute.Tensor, mb: cute.Tensor, my: cute.Tensor, stream: cuda.CUstream
):
    rows, dim = mx.shape
    grid = [(dim + THREADS * PER - 1) // (THREADS * PER), rows, 1]
    scale_bias_sigmoid_clamp_kernel(mx, ms, mb, my).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)
        self._compiled: dict[tuple, object] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        args = [from_dlpack(t.detach()) for t in (x, self.scale, self.bias, y)]
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        key = (tuple(x.shape), x.dtype)
        if key not in self._compiled:
            self._compiled[key] = cute.compile(scale_bias_sigmoid_clamp, *args, stream)
        self._compiled[key](*args, stream)
        return y
