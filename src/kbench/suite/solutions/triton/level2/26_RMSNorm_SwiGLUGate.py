"""RMSNorm gated by SiLU(g): one Triton program per row. Rows up to 16384 floats are read once into
registers (mean square, then x * rsqrt(ms + eps) * w * silu(g)); longer rows loop, the second pass
re-reading x from L2 (eager: pow + mean + add + rsqrt + mul + mul + silu + mul)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 16384  # 32 floats per thread at 16 warps; above this registers spill


@triton.jit
def _gate(v, r, g_ptr, w_ptr, off, cols, mask):
    g = tl.load(g_ptr + off + cols, mask=mask)
    return v * r * tl.load(w_ptr + cols, mask=mask) * g * tl.sigmoid(g)


@triton.jit
def rmsnorm_swiglu_kernel(x_ptr, g_ptr, w_ptr, out_ptr, n, eps, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * n
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask, other=0.0)
        r = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n + eps)
        tl.store(out_ptr + off + cols, _gate(v, r, g_ptr, w_ptr, off, cols, mask), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + off + cols, mask=cols < n, other=0.0)
            acc += v * v
        r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            v = tl.load(x_ptr + off + cols, mask=mask)
            tl.store(out_ptr + off + cols, _gate(v, r, g_ptr, w_ptr, off, cols, mask), mask=mask)


def row_launch(n: int) -> dict:
    """Block size, path and warps for a row of n floats."""
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": 2048, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x, g = x.contiguous(), g.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rmsnorm_swiglu_kernel[(x.numel() // n,)](x, g, self.weight, out, n, float(self.eps), **row_launch(n))
        return out
