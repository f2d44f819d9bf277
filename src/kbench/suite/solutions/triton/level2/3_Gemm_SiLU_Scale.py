"""Linear + SiLU + scale: cuBLAS GEMM without its bias, then one Triton kernel adds the bias, applies SiLU
and the scale in place (eager: addmm + silu + mul)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_silu_scale_kernel(y_ptr, b_ptr, scale, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n, mask=mask)
    v = v * tl.sigmoid(v) * scale
    tl.store(y_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        total = y.numel()
        bias_silu_scale_kernel[(triton.cdiv(total, 1024),)](y, self.linear.bias, float(self.scale), total, y.shape[1], BLOCK=1024)
        return y
