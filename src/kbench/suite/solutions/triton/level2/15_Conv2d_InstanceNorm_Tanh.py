"""Conv2d + InstanceNorm + tanh: cuDNN convolution, then one Triton program per (sample, channel) plane
computes centered two-pass statistics, normalizes and applies tanh in place. The conv bias is dropped: a
per-plane constant cancels in instance normalization without affine (eager: conv + bias + instance_norm
+ tanh)."""

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
def instancenorm_tanh_kernel(y_ptr, hw, eps, BLOCK: tl.constexpr):
    plane = y_ptr + tl.program_id(0).to(tl.int64) * hw
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(plane + offs, mask=offs < hw, other=0.0)
    mean = tl.sum(acc, axis=0) / hw
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hw
        d = tl.where(mask, tl.load(plane + offs, mask=mask) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hw + eps)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hw
        tl.store(plane + offs, _tanh((tl.load(plane + offs, mask=mask) - mean) * rstd), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.instance_norm = nn.InstanceNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        instancenorm_tanh_kernel[(n * c,)](y, h * w, self.instance_norm.eps, BLOCK=2048)
        return y
