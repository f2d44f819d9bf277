"""Conv2d + min over channels + tanh + tanh: cuDNN convolution without its bias, then one Triton kernel
(a block of output pixels per program, coalesced) adds the bias, takes the channel minimum and applies
tanh twice (eager: conv + bias + min + tanh + tanh)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    # tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)): one exp, no overflow for large |x|
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, r, -r)

@triton.jit
def bias_channelmin_tanh2_kernel(y_ptr, b_ptr, out_ptr, total, channels, hw, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    base = y_ptr + (offs // hw) * channels * hw + offs % hw
    m = tl.full([BLOCK], float("inf"), tl.float32)
    for c in range(0, channels):
        m = tl.minimum(m, tl.load(base + c * hw, mask=mask, other=0.0) + tl.load(b_ptr + c))
    tl.store(out_ptr + offs, _tanh(_tanh(m)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        out = torch.empty((n, 1, h, w), device=y.device, dtype=y.dtype)
        total = n * h * w
        bias_channelmin_tanh2_kernel[(triton.cdiv(total, 256),)](y, self.conv.bias, out, total, c, h * w, BLOCK=256)
        return out
