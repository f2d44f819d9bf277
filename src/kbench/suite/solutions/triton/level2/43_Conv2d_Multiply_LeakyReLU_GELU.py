"""Conv2d + per-channel multiplier + LeakyReLU + GELU: cuDNN convolution without its bias, then one Triton
kernel computes gelu(leaky_relu((y + b_c) * m_c, 0.1)) in place (eager: conv + bias, mul, leaky_relu, gelu ->
up to 8 passes over the 537 MB conv output at the full size; here one read and one write: 1.1 GB of HBM
traffic instead of up to 4.3 GB). A grid of (plane, block) programs loads each channel's bias and multiplier
once, with no per-element index arithmetic. GELU is the exact erf form (F.gelu's default).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
7.2e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_mul_leaky_gelu_kernel(y_ptr, b_ptr, m_ptr, hw, channels, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    ptr = y_ptr + plane.to(tl.int64) * hw + offs
    c = plane % channels
    v = (tl.load(ptr, mask=mask) + tl.load(b_ptr + c)) * tl.load(m_ptr + c)
    v = tl.where(v >= 0, v, 0.1 * v)
    tl.store(ptr, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, multiplier_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.multiplier = nn.Parameter(1.0 + torch.randn(multiplier_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        block = min(1024, triton.next_power_of_2(h * w))
        bias_mul_leaky_gelu_kernel[(n * c, triton.cdiv(h * w, block))](
            y, self.conv.bias, self.multiplier, h * w, c, BLOCK=block
        )
        return y
