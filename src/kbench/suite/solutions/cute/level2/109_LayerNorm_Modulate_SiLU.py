"""Non-affine LayerNorm, per-sample scale and shift, then SiLU, as one CuTe DSL row kernel.

Grid (seq_len, batch): one 256-thread CTA per row of x, which keeps its ceil(dim / 256) elements per
thread in registers (one read), takes the mean and then the variance of the centred values (two-pass)
through warp shuffles plus an 8-slot shared-memory merge, and writes silu(norm * (1 + scale[b]) +
shift[b]) once. Columns past dim are masked out of both sums. Compiled once per input shape with
`cute.compile`; compiles for sm_90a without a GPU, runs only on one.
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
    # second barrier: the next block_sum overwrites red, which slower warps may still be reading
    cute.arch.barrier()
    return total


@cute.kernel
def layernorm_modulate_silu_kernel(
    gx: cute.Tensor, gs: cute.Tensor, gt: cute.Tensor, gy: cute.Tensor, eps: cutlass.Float32
):
    tidx, _, _ = cute.arch.thread_idx()
    pos, b, _ = cute.arch.block_idx()
    dim = gx.shape[2]
    per = (dim + THREADS - 1) // THREADS
    smem = cutlass.memory.SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), 16)
    vals = cute.make_rmem_tensor(per, cutlass.Float32)

    part = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per):
        col = tidx + j * THREADS
        v = cutlass.Float32(0.0)
        if col < dim:
            v = gx[b, pos, col]
        vals[j] = v
        part = part + v
    mean = block_sum(part, red) / dim

    part = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(per):
        col = tidx + j * THREADS
        if col < dim:
            d = vals[j] - mean
            part = part + d * d
    rstd = cute.math.rsqrt(block_sum(part, red) / dim + eps)

    for j in cutlass.range_constexpr(per):
        col = tidx + j * THREADS
        if col < dim:
            v = (vals[j] - mean) * rstd * (1.0 + gs[b, col]) + gt[b, col]
            gy[b, pos, col] = v / (1.0 + cute.math.exp(-v))


@cute.jit
def layernorm_modulate_silu(
    mx: cute.Tensor,
    ms: cute.Tensor,
    mt: cute.Tensor,
    my: cute.Tensor,
    eps: cutlass.Float32,
    stream: cuda.CUstream,
):
    batch, seq_len, _ = mx.shape
    kernel = layernorm_modulate_silu_kernel(mx, ms, mt, my, eps)
    kernel.launch(grid=[seq_len, batch, 1], block=[THREADS, 1, 1], stream=stream)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)
        self._compiled: dict[tuple, object] = {}

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        args = [from_dlpack(t) for t in (x, scale.contiguous(), shift.contiguous(), y)]
        eps = cutlass.Float32(self.norm.eps)
        stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream)
        key = (tuple(x.shape), x.dtype)
        if key not in self._compiled:
            self._compiled[key] = cute.compile(layernorm_modulate_silu, *args, eps, stream)
        self._compiled[key](*args, eps, stream)
        return y
