"""Linear + logsumexp + ReLU: cuBLAS GEMM without its bias, then one Triton program per row adds the bias
and computes an online logsumexp (per-lane running max and rescaled sum, merged at the end) followed by
ReLU (eager: addmm + logsumexp + relu)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_logsumexp_relu_kernel(y_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    row = y_ptr + tl.program_id(0).to(tl.int64) * n
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(row + cols, mask=mask, other=float("-inf")) + tl.load(b_ptr + cols, mask=mask, other=0.0)
        m_new = tl.maximum(m, v)
        s = s * tl.exp(tl.where(m_new == float("-inf"), 0.0, m - m_new)) + tl.where(mask, tl.exp(v - m_new), 0.0)
        m = m_new
    mb = tl.max(m, axis=0)
    total = tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - mb)), axis=0)
    tl.store(out_ptr + tl.program_id(0), tl.maximum(mb + tl.log(total), 0.0))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        m, n = y.shape
        out = torch.empty((m, 1), device=y.device, dtype=y.dtype)
        bias_logsumexp_relu_kernel[(m,)](y, self.linear.bias, out, n, BLOCK=1024)
        return out
