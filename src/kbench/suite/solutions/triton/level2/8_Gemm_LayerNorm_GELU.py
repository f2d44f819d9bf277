"""Linear + LayerNorm + GELU: cuBLAS GEMM without its bias, then one Triton program per row adds the bias,
computes centered two-pass statistics (the row stays in L1/L2), normalizes, applies the affine transform
and erf GELU in place (eager: addmm + layer_norm + gelu)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_layernorm_gelu_kernel(y_ptr, bias_ptr, w_ptr, b_ptr, n, eps, BLOCK: tl.constexpr):
    row = y_ptr + tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask) + tl.load(bias_ptr + cols, mask=mask)
        acc += tl.where(mask, v, 0.0)
    mean = tl.sum(acc, axis=0) / n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask) + tl.load(bias_ptr + cols, mask=mask)
        d = tl.where(mask, v - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask) + tl.load(bias_ptr + cols, mask=mask)
        v = (v - mean) * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        tl.store(row + cols, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.layer_norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        m, n = y.shape
        ln = self.layer_norm
        bias_layernorm_gelu_kernel[(m,)](y, self.linear.bias, ln.weight, ln.bias, n, ln.eps, BLOCK=1024)
        return y
