"""Tanh-approximated GELU as one CuTe DSL elementwise kernel (the five torch operators in one pass).

A 2-D grid: blockIdx.y is the row, each 256-thread CTA covers 1024 columns of it, every thread four
columns 256 apart (each of a warp's four loads is one coalesced 128-byte line). Columns past dim are
masked. tanh is the DSL's precise `cute.math.tanh` (not the tanh.approx instruction, whose ~2^-11
relative error is far above fp32's). Compiled once per input shape with `cute.compile`; compiles for
sm_90a without a GPU, runs only on one.
"""

import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256
PER = 4  # columns per thread: 1024 per CTA, 16 CTAs per 16384-wide row of the full preset
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@cute.kernel
def gelu_tanh_kernel(gx: cute.Tensor, gy: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    dim = gx.shape[1]
    for j in cutlass.range_constexpr(PER):
        col = bx * (THREADS * PER) + j * THREADS + tidx
        if col < dim:
            x = gx[row, col]
            inner = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
            gy[row, col] = 0.5 * x * (1.0 + cute.math.tanh(inner))


@cute.jit
def gelu_tanh(mx: cute.Tensor, my: cute.Tensor, stream: cuda.CUstream):
    rows, dim = mx.shape
    grid = [(dim + THREADS * PER - 1) // (THREADS * PER), rows, 1]
    gelu_tanh_kernel(mx, my).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._compiled: dict[tuple, object] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.contiguous().view(-1, x.shape[-1])
        y = torch.empty_like(x2)
        args = [from_dlpack(t) for t in (x2, y)]
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        key = (tuple(x2.shape), x.dtype)
        if key not in self._compiled:
            self._compiled[key] = cute.compile(gelu_tanh, *args, stream)
        self._compiled[key](*args, stream)
        return y.view(x.shape)
