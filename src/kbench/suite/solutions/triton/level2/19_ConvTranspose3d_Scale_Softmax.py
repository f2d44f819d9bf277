"""ConvTranspose3d + scale + softmax over channels: cuDNN transposed convolution without its bias, then one
Triton kernel (a block of voxels per program, coalesced) adds the bias, scales and runs an online softmax
over the channel axis in place (eager: conv_transpose + bias + mul + softmax)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_scale_softmax_kernel(y_ptr, b_ptr, total, channels, spatial, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    base = y_ptr + (offs // spatial) * channels * spatial + offs % spatial
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for c in range(0, channels):
        v = (tl.load(base + c * spatial, mask=mask, other=0.0) + tl.load(b_ptr + c)) * scale
        m_new = tl.maximum(m, v)
        s = s * tl.exp(m - m_new) + tl.exp(v - m_new)
        m = m_new
    inv = 1.0 / s
    for c in range(0, channels):
        v = (tl.load(base + c * spatial, mask=mask, other=0.0) + tl.load(b_ptr + c)) * scale
        tl.store(base + c * spatial, tl.exp(v - m) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, scale: float
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        n, c = y.shape[:2]
        spatial = y.numel() // (n * c)
        total = n * spatial
        grid = (triton.cdiv(total, 256),)
        bias_scale_softmax_kernel[grid](y, ct.bias, total, c, spatial, float(self.scale), BLOCK=256)
        return y
