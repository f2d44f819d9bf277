"""Square linear + residual + ReLU: cuBLAS GEMM without its bias, then one Triton kernel adds the bias and
the input and applies ReLU in place (eager: addmm + add + relu)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_residual_relu_kernel(y_ptr, b_ptr, x_ptr, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.mm(x, self.linear.weight.t())
        total = y.numel()
        bias_residual_relu_kernel[(triton.cdiv(total, 1024),)](y, self.linear.bias, x, total, y.shape[1], BLOCK=1024)
        return y
