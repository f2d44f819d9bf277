"""Row variance written as mean, subtract, square, mean: one Triton program per row, a centered two-pass
over the row (the second read hits L1/L2) instead of four full passes (eager: mean + sub + pow + mean)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def row_variance_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = x_ptr + tl.program_id(0).to(tl.int64) * n
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


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        row_variance_kernel[(x.numel() // n,)](x, out, n, BLOCK=2048)
        return out
