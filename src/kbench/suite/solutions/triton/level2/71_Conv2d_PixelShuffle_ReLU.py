"""Conv2d + pixel shuffle + ReLU: cuDNN convolution without its bias, then one Triton kernel writes the
shuffled output directly: output (c, r*h + i, r*w + j) is conv channel c*r*r + i*r + j at (h, w), so each
program writes a contiguous block of an output plane, gathering from the r*r source planes (each read exactly
once overall), with the bias and ReLU applied on the way. At the full size the 268 MB conv output is read once
and the output written once; eager adds the bias (read + write), copies for pixel_shuffle (read + write) and
applies relu (read + write).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
3.6e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def pixel_shuffle_bias_relu_kernel(y_ptr, b_ptr, out_ptr, channels, height, width, R: tl.constexpr,
                                   BLOCK: tl.constexpr):
    # program (output plane = sample * (channels / R^2) + c, block of output pixels)
    oplane = tl.program_id(0)
    q = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    ow = width * R
    mask = q < height * R * ow
    oy = q // ow
    ox = q % ow
    src_c = (oplane * (R * R)) % channels + (oy % R) * R + ox % R  # conv channel, sample stripped
    n = oplane // (channels // (R * R))
    src = y_ptr + (n * channels + src_c).to(tl.int64) * height * width + (oy // R) * width + ox // R
    v = tl.load(src, mask=mask, other=0.0) + tl.load(b_ptr + src_c, mask=mask, other=0.0)
    tl.store(out_ptr + oplane.to(tl.int64) * height * width * R * R + q, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, upscale: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.upscale = upscale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        r = self.upscale
        out = torch.empty((n, c // (r * r), h * r, w * r), device=y.device, dtype=y.dtype)
        block = min(1024, triton.next_power_of_2(h * w * r * r))
        pixel_shuffle_bias_relu_kernel[(n * (c // (r * r)), triton.cdiv(h * w * r * r, block))](
            y, self.conv.bias, out, c, h, w, R=r, BLOCK=block
        )
        return out
