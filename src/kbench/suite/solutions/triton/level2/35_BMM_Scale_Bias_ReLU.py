"""Batched matmul + scale + bias + ReLU: cuBLAS batched GEMM, then one Triton kernel applies the scale,
bias and ReLU in place (eager: bmm + mul + add + relu)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_bias_relu_kernel(y_ptr, b_ptr, scale, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(y_ptr + offs, mask=mask) * scale + tl.load(b_ptr + offs % n, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, n: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = torch.bmm(a, b)
        total = y.numel()
        scale_bias_relu_kernel[(triton.cdiv(total, 1024),)](y, self.bias, float(self.scale), total, y.shape[-1], BLOCK=1024)
        return y
