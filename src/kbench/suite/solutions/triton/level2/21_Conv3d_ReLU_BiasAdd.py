"""Conv3d + ReLU + bias add: cuDNN convolution without its bias, then one Triton kernel adds the conv bias,
applies ReLU and adds the second bias in place (eager: conv + bias + relu + add)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_relu_bias_kernel(y_ptr, cb_ptr, b_ptr, total, spatial, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = (offs // spatial) % channels
    v = tl.load(y_ptr + offs, mask=mask)
    v = tl.maximum(v + tl.load(cb_ptr + c, mask=mask), 0.0) + tl.load(b_ptr + c, mask=mask)
    tl.store(y_ptr + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple[int, ...]):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        total = y.numel()
        spatial = total // (y.shape[0] * y.shape[1])
        bias_relu_bias_kernel[(triton.cdiv(total, 1024),)](y, self.conv.bias, self.bias, total, spatial, y.shape[1], BLOCK=1024)
        return y
