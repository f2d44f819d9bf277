"""ConvTranspose3d + LeakyReLU + per-channel multiplier + LeakyReLU + MaxPool3d: cuDNN transposed convolution
without its bias, then one Triton kernel reads each 2x2x2 window, applies leaky(leaky(y + b_c) * m_c) to every
element (correct for any sign of the multiplier) and writes only the window's max. At the full size the 403 MB
conv output is read once and 50 MB written; eager adds the bias, then runs leaky_relu, mul and leaky_relu (a
read and a write of 403 MB each) and the pooling (a read).

The transposed convolution (11 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 0
(bit-identical)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def leaky_mul_leaky_maxpool_kernel(y_ptr, b_ptr, m_ptr, out_ptr, channels, depth, height, width, od, oh, ow,
                                   BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    npool = od * oh * ow
    mask = o < npool
    c = plane % channels
    b = tl.load(b_ptr + c)
    mul = tl.load(m_ptr + c)
    src = (y_ptr + plane.to(tl.int64) * depth * height * width + (o // (oh * ow)) * 2 * height * width
           + ((o // ow) % oh) * 2 * width + (o % ow) * 2)
    best = tl.full([BLOCK], float("-inf"), tl.float32)
    for i in tl.static_range(2):
        for j in tl.static_range(2):
            for k in tl.static_range(2):
                v = tl.load(src + i * height * width + j * width + k, mask=mask, other=0.0) + b
                v = tl.where(v >= 0, v, 0.2 * v) * mul
                best = tl.maximum(best, tl.where(v >= 0, v, 0.2 * v))
    tl.store(out_ptr + plane.to(tl.int64) * npool + o, best, mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
        multiplier_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        )
        self.multiplier = nn.Parameter(1.0 + torch.randn(multiplier_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        n, c, d, h, w = y.shape
        od, oh, ow = d // 2, h // 2, w // 2
        out = torch.empty((n, c, od, oh, ow), device=y.device, dtype=y.dtype)
        block = min(1024, triton.next_power_of_2(od * oh * ow))
        leaky_mul_leaky_maxpool_kernel[(n * c, triton.cdiv(od * oh * ow, block))](
            y, ct.bias, self.multiplier, out, c, d, h, w, od, oh, ow, BLOCK=block
        )
        return out
