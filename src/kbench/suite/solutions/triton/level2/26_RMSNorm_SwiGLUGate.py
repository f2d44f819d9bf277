"""RMSNorm gated by SiLU(g): one Triton program per row: the mean square, then x * rsqrt(ms + eps) * w *
silu(g) in the pass that writes (eager: pow + mean + add + rsqrt + mul + mul + silu + mul)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

@triton.jit
def rmsnorm_swiglu_kernel(x_ptr, g_ptr, w_ptr, out_ptr, n, eps, BLOCK: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + off + cols, mask=cols < n, other=0.0)
        acc += v * v
    r = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        g = tl.load(g_ptr + off + cols, mask=mask)
        v = tl.load(x_ptr + off + cols, mask=mask) * r * tl.load(w_ptr + cols, mask=mask)
        tl.store(out_ptr + off + cols, v * g * tl.sigmoid(g), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        x, g = x.contiguous(), g.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rmsnorm_swiglu_kernel[(x.numel() // n,)](x, g, self.weight, out, n, float(self.eps), BLOCK=2048)
        return out
