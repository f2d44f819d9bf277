"""Conv3d + divide + MaxPool3d + global average pool + bias + sum over channels: cuDNN convolution without its
bias, then two Triton kernels:
1. one program per (sample, channel) plane walks the 2x2x2 windows, takes each window's max of (y + b_c) /
   divisor (per element, so any sign of the divisor is right) and sums the maxima;
2. one program per sample adds the channels' means and biases in a fixed order.
The 220 MB conv output (full size) is read once (the windows skip trailing voxels) and nothing of its size is
written; eager adds the conv bias (read + write), divides (read + write), pools (read, 27 MB write), then runs
the average, add and sum.

The convolution (48 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.8e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def div_maxpool_sum_kernel(y_ptr, cb_ptr, sum_ptr, channels, depth, height, width, od, oh, ow, inv_div,
                           BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    base = y_ptr + plane.to(tl.int64) * depth * height * width
    b = tl.load(cb_ptr + plane % channels)
    npool = od * oh * ow
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, npool, BLOCK):
        o = start + tl.arange(0, BLOCK)
        mask = o < npool
        src = base + (o // (oh * ow)) * 2 * height * width + ((o // ow) % oh) * 2 * width + (o % ow) * 2
        best = tl.full([BLOCK], float("-inf"), tl.float32)
        for i in tl.static_range(2):
            for j in tl.static_range(2):
                for k in tl.static_range(2):
                    v = tl.load(src + i * height * width + j * width + k, mask=mask, other=0.0)
                    best = tl.maximum(best, (v + b) * inv_div)
        acc += tl.where(mask, best, 0.0)
    tl.store(sum_ptr + plane, tl.sum(acc, axis=0))


@triton.jit
def channel_sum_kernel(sum_ptr, b_ptr, out_ptr, channels, npool, BC: tl.constexpr):
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    cmask = c < channels
    v = tl.load(sum_ptr + n * channels + c, mask=cmask, other=0.0) / npool + tl.load(b_ptr + c, mask=cmask, other=0.0)
    tl.store(out_ptr + n, tl.sum(tl.where(cmask, v, 0.0), axis=0))


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        divisor: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, d, h, w = y.shape
        od, oh, ow = d // 2, h // 2, w // 2
        sums = torch.empty(n * c, device=y.device, dtype=torch.float32)
        div_maxpool_sum_kernel[(n * c,)](
            y, self.conv.bias, sums, c, d, h, w, od, oh, ow, 1.0 / self.divisor,
            BLOCK=min(1024, triton.next_power_of_2(od * oh * ow)),
        )
        out = torch.empty((n, 1, 1, 1), device=y.device, dtype=y.dtype)
        channel_sum_kernel[(n,)](sums, self.bias, out, c, od * oh * ow, BC=triton.next_power_of_2(c))
        return out
