"""Conv2d + HardSwish + scale: cuDNN convolution without its bias, then one Triton kernel adds the bias,
applies HardSwish and the scale in place (eager: conv + bias + hardswish + mul)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_hardswish_scale_kernel(y_ptr, b_ptr, scale, total, spatial, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = (offs // spatial) % channels
    v = tl.load(y_ptr + offs, mask=mask)
    v = v + tl.load(b_ptr + c, mask=mask)
    v = v * tl.minimum(tl.maximum(v + 3.0, 0.0), 6.0) / 6.0 * scale
    tl.store(y_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        total = y.numel()
        spatial = total // (y.shape[0] * y.shape[1])
        bias_hardswish_scale_kernel[(triton.cdiv(total, 1024),)](y, self.conv.bias, float(self.scale), total, spatial, y.shape[1], BLOCK=1024)
        return y
