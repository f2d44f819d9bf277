"""Conv2d + GELU + global average pool: cuDNN convolution without its bias, then one Triton program per
(sample, channel) plane adds the bias, applies erf GELU and averages; the activation map is never written
back (eager: conv + bias + gelu + adaptive_avg_pool2d)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_gelu_avgpool_kernel(y_ptr, b_ptr, out_ptr, hw, channels, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    plane = y_ptr + pid.to(tl.int64) * hw
    b = tl.load(b_ptr + pid % channels)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hw
        v = tl.load(plane + offs, mask=mask) + b
        acc += tl.where(mask, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), 0.0)
    tl.store(out_ptr + pid, tl.sum(acc, axis=0) / hw)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        out = torch.empty((n, c), device=y.device, dtype=y.dtype)
        bias_gelu_avgpool_kernel[(n * c,)](y, self.conv.bias, out, h * w, c, BLOCK=1024)
        return out
