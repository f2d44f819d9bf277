"""Residual add + LayerNorm: one Triton program per row computes x + residual on the fly, so the sum is
never written. Rows up to 16384 floats stay in registers (one read of each input, one write); longer rows
fall back to a centered two-pass loop whose re-reads hit L2 (eager: add + layer_norm)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 16384  # 32 floats per thread at 16 warps; above this registers spill


@triton.jit
def _load_sum(x_ptr, r_ptr, off, cols, mask):
    return tl.load(x_ptr + off + cols, mask=mask, other=0.0) + tl.load(r_ptr + off + cols, mask=mask, other=0.0)


@triton.jit
def add_layernorm_kernel(
    x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr
):
    off = tl.program_id(0).to(tl.int64) * n
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        v = _load_sum(x_ptr, r_ptr, off, cols, mask)
        mean = tl.sum(v, axis=0) / n
        d = tl.where(mask, v - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
        y = d * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        tl.store(out_ptr + off + cols, y, mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += _load_sum(x_ptr, r_ptr, off, cols, cols < n)
        mean = tl.sum(acc, axis=0) / n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            d = tl.where(mask, _load_sum(x_ptr, r_ptr, off, cols, mask) - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            v = _load_sum(x_ptr, r_ptr, off, cols, mask)
            y = (v - mean) * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
            tl.store(out_ptr + off + cols, y, mask=mask)


def row_launch(n: int) -> dict:
    """Block size, path and warps for a row of n floats."""
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": 2048, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        ln = self.layer_norm
        add_layernorm_kernel[(x.numel() // n,)](x, residual, ln.weight, ln.bias, out, n, ln.eps, **row_launch(n))
        return out
