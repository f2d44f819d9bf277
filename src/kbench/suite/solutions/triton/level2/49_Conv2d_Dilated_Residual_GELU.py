"""Dilated Conv2d + residual + GELU: cuDNN convolution without its bias, then one Triton kernel computes
gelu(y + b_c + x) in place (eager: conv + bias, add, gelu -> up to 7 passes over 268 MB tensors at the full
size; here two reads and one write). A grid of (plane, block) programs loads each channel's bias once, with no
per-element index arithmetic. GELU is the exact erf form (F.gelu's default).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
9.5e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_residual_gelu_kernel(y_ptr, x_ptr, b_ptr, hw, channels, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    base = plane.to(tl.int64) * hw + offs
    v = tl.load(y_ptr + base, mask=mask) + tl.load(x_ptr + base, mask=mask) + tl.load(b_ptr + plane % channels)
    tl.store(y_ptr + base, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cv = self.conv
        y = F.conv2d(x, cv.weight, None, cv.stride, cv.padding, cv.dilation).contiguous()
        n, c, h, w = y.shape
        block = min(1024, triton.next_power_of_2(h * w))
        bias_residual_gelu_kernel[(n * c, triton.cdiv(h * w, block))](y, x, cv.bias, h * w, c, BLOCK=block)
        return y
