"""The seed's hand-written tanh GELU (eight separate torch ops, eight passes over memory) as one Triton
kernel: one read and one write per element."""

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
def gelu_tanh_kernel(x_ptr, out_ptr, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    v = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, 0.5 * v * (1.0 + _tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        gelu_tanh_kernel[(triton.cdiv(x.numel(), 2048),)](x, out, x.numel(), BLOCK=2048)
        return out
