"""Row variance written as mean, subtract, square, mean: one Triton program per row. Rows up to 16384 floats
are read once and kept in registers for the centered two-pass statistics; longer rows loop, the second
pass re-reading from L2 (eager: mean + sub + pow + mean, four passes and two temporaries)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 16384  # 32 floats per thread at 16 warps; above this registers spill


@triton.jit
def row_variance_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr):
    row = x_ptr + tl.program_id(0).to(tl.int64) * n
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask, other=0.0)
        d = tl.where(mask, v - tl.sum(v, axis=0) / n, 0.0)
        tl.store(out_ptr + tl.program_id(0), tl.sum(d * d, axis=0) / n)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(row + cols, mask=cols < n, other=0.0)
        mean = tl.sum(acc, axis=0) / n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            d = tl.where(mask, tl.load(row + cols, mask=mask) - mean, 0.0)
            acc += d * d
        tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0) / n)


def row_launch(n: int) -> dict:
    """Block size, path and warps for a row of n floats."""
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": 2048, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        row_variance_kernel[(x.numel() // n,)](x, out, n, **row_launch(n))
        return out
