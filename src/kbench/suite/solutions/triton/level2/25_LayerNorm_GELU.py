"""LayerNorm + erf GELU: one Triton program per row: centered two-pass statistics (the row stays in L1/L2),
then normalize, affine and GELU in the pass that writes (eager: layer_norm + gelu, two full passes)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def layernorm_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask)
        acc += tl.where(mask, v, 0.0)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask)
        d = tl.where(mask, v - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask)
        v = (v - mean) * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        tl.store(out_ptr + off + cols, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        ln = self.layer_norm
        layernorm_gelu_kernel[(x.numel() // n,)](x, ln.weight, ln.bias, out, n, ln.eps, BLOCK=2048)
        return out
