"""Per-feature scale and bias, sigmoid, clamp to [0.1, 0.9]: one Triton kernel instead of four passes
(eager: mul + add + sigmoid + clamp)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_sigmoid_clamp_kernel(x_ptr, s_ptr, b_ptr, out_ptr, total, dim, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = offs % dim
    v = tl.load(x_ptr + offs, mask=mask) * tl.load(s_ptr + c, mask=mask) + tl.load(b_ptr + c, mask=mask)
    tl.store(out_ptr + offs, tl.minimum(tl.maximum(tl.sigmoid(v), 0.1), 0.9), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        total = x.numel()
        grid = (triton.cdiv(total, 2048),)
        scale_bias_sigmoid_clamp_kernel[grid](x, self.scale, self.bias, out, total, x.shape[-1], BLOCK=2048)
        return out
