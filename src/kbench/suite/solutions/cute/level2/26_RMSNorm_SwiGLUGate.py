"""RMSNorm with a learned weight times SiLU of a gate, as one CuTe DSL row kernel.

One 256-thread CTA per row: each thread keeps its ceil(dim / 256) elements of x in registers (one read),
the mean of x^2 comes from warp shuffles plus an 8-slot shared-memory merge, and the gate is read and
applied in the same pass that writes the output. Columns past dim are masked out of the sum. Compiled
once per input shape with `cute.compile`; compiles for sm_90a without a GPU, runs only on one.
"""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256
WARPS = THREADS // 32


@cute.jit
def block_sum(val: cutlass.Float32, red: cute.Tensor) -> cutlass.Float32:
    val = cute.arch.warp_reduction_sum(val)
    # warp_idx() is a full-warp shuffle (it makes the index warp-uniform): every lane must run it, so it
    # comes before the lane-0 branch; run by lane 0 alone, the warp waited for the other 31 forever
    warp = cute.arch.warp_idx()
    if cute.arch.lane_idx() == 0:
        red[warp] = val
    cute.arch.barrier()
    total = red[0]
    for w in cutlass.range_constexpr(1, WARPS):
        total = total + red[w]
    return total


@cute.kernel
def rmsnorm_swiglu_kernel(
    gx: cute.Tensor, gg: cute.Tensor, gw: cute.Tensor, gy: cute.Tensor, eps: cutlass.Float32
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    dim = gx.shape[1]
    per = (dim + THREADS - 1) // THREADS
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), 16)
    vals = cute.make_rmem_tensor(per, cutlass.Float32)

    part = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per):
        col = tidx + j * THREADS
        v = cutlass.Float32(0.0)
        if col < dim:
            v = gx[row, col]
        vals[j] = v
        part = part + v * v
    inv_rms = cute.math.rsqrt(block_sum(part, red) / dim + eps)

    for j in cutlass.range_constexpr(per):
        col = tidx + j * THREADS
        if col < dim:
            g = gg[row, col]
            silu = g / (1.0 + cute.math.exp(-g))
            gy[row, col] = vals[j] * inv_rms * gw[col] * silu


@cute.jit
def rmsnorm_swiglu(
    mx: cute.Tensor,
    mg: cute.Tensor,
    mw: cute.Tensor,
    my: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
):
    kernel = rmsnorm_swiglu_kernel(mx, mg, mw, my, eps)
    kernel.launch(grid=[mx.shape[0], 1, 1], block=[THREADS, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self._compiled: dict[tuple, object] = {}

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        dim = x.shape[-1]
        x2 = x.contiguous().view(-1, dim)
        g2 = g.contiguous().view(-1, dim)
        y = torch.empty_like(x2)
        args = [from_dlpack(t.detach()) for t in (x2, g2, self.weight, y)]
        eps = cutlass.Float32(self.eps)
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        key = (tuple(x2.shape), x.dtype)
        if key not in self._compiled:
            self._compiled[key] = cute.compile(rmsnorm_swiglu, *args, eps, stream)
        self._compiled[key](*args, eps, stream)
        return y.view(x.shape)
