"""GELU MLP with residual: the two GEMMs stay in cuBLAS; one Triton kernel adds fc1's bias and applies
erf GELU in place, and a second adds fc2's bias and the residual in place (eager: addmm + gelu + addmm +
add)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_gelu_kernel(h_ptr, b_ptr, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(h_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n, mask=mask)
    tl.store(h_ptr + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


@triton.jit
def bias_residual_kernel(y_ptr, b_ptr, x_ptr, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n, mask=mask) + tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        h = torch.mm(x, self.fc1.weight.t())
        bias_gelu_kernel[(triton.cdiv(h.numel(), 1024),)](h, self.fc1.bias, h.numel(), h.shape[1], BLOCK=1024)
        y = torch.mm(h, self.fc2.weight.t())
        bias_residual_kernel[(triton.cdiv(y.numel(), 1024),)](y, self.fc2.bias, x, y.numel(), y.shape[1], BLOCK=1024)
        return y
