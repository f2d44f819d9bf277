"""Linear + Mish + clamp: cuBLAS GEMM without its bias, then one Triton kernel adds the bias, applies Mish
and clamps to [-1, 1] in place (eager: addmm + mish + clamp)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    # tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)): one exp, no overflow for large |x|
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, r, -r)

@triton.jit
def bias_mish_clamp_kernel(y_ptr, b_ptr, total, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(y_ptr + offs, mask=mask) + tl.load(b_ptr + offs % n, mask=mask)
    sp = tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(tl.minimum(v, 20.0))))  # torch's softplus threshold
    v = tl.minimum(tl.maximum(v * _tanh(sp), -1.0), 1.0)
    tl.store(y_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        total = y.numel()
        bias_mish_clamp_kernel[(triton.cdiv(total, 1024),)](y, self.linear.bias, total, y.shape[1], BLOCK=1024)
        return y
