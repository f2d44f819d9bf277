"""Residual add + LayerNorm: one Triton program per row computes x + residual on the fly for the centered
statistics and for the output, so the sum is never written (eager: add + layer_norm)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def add_layernorm_kernel(x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask) + tl.load(r_ptr + off + cols, mask=mask)
        acc += tl.where(mask, v, 0.0)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask) + tl.load(r_ptr + off + cols, mask=mask)
        d = tl.where(mask, v - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask) + tl.load(r_ptr + off + cols, mask=mask)
        v = (v - mean) * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        tl.store(out_ptr + off + cols, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        ln = self.layer_norm
        add_layernorm_kernel[(x.numel() // n,)](x, residual, ln.weight, ln.bias, out, n, ln.eps, BLOCK=2048)
        return out
