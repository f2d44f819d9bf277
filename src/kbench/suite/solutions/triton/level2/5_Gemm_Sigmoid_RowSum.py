"""Linear + sigmoid + row sum: cuBLAS GEMM without its bias, then one Triton program per row adds the
bias, applies sigmoid and reduces the row; the activation is never written back (eager: addmm + sigmoid
+ sum)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_sigmoid_rowsum_kernel(y_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = y_ptr + tl.program_id(0).to(tl.int64) * n
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
        acc += tl.where(mask, tl.sigmoid(v), 0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        m, n = y.shape
        out = torch.empty((m, 1), device=y.device, dtype=y.dtype)
        bias_sigmoid_rowsum_kernel[(m,)](y, self.linear.bias, out, n, BLOCK=1024)
        return out
