"""Conv2d + Mish + Mish: cuDNN convolution without its bias, then one Triton kernel adds the per-channel bias
and applies Mish twice in place (eager: conv + bias, mish, mish -> up to 6 passes over the 403 MB conv output
at the full size; here one read and one write). A grid of (plane, block) programs loads each channel's bias
once, with no per-element index arithmetic.

Mish is x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2): one exp and one division, exact in
form (no log1p/tanh round trip); x is capped at 20 inside the exp, where n / (n + 2) is already 1.0 in fp32
(PyTorch's own softplus threshold).

The convolution (116 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.2e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _mish(x):
    e = tl.exp(tl.minimum(x, 20.0))
    n = e * (e + 2.0)
    return x * (n / (n + 2.0))


@triton.jit
def bias_mish_mish_kernel(y_ptr, b_ptr, hw, channels, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    ptr = y_ptr + plane.to(tl.int64) * hw + offs
    v = tl.load(ptr, mask=mask) + tl.load(b_ptr + plane % channels)
    tl.store(ptr, _mish(_mish(v)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        block = min(1024, triton.next_power_of_2(h * w))
        bias_mish_mish_kernel[(n * c, triton.cdiv(h * w, block))](y, self.conv.bias, h * w, c, BLOCK=block)
        return y
