"""Conv2d + subtract the mean over channels + ReLU: cuDNN convolution without its bias, then one Triton
kernel: each program holds a [channels x pixels] tile of one sample in registers (coalesced along the pixels),
adds the bias, subtracts each pixel's channel mean and writes relu in place. At the full size the 268 MB conv
output is read once and written once; eager adds the bias (read + write), takes the mean (read), subtracts
(two reads and a write) and applies relu (read + write).

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
def bias_center_relu_kernel(y_ptr, b_ptr, channels, hw, BC: tl.constexpr, BP: tl.constexpr):
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    p = tl.program_id(1) * BP + tl.arange(0, BP)
    cmask = c < channels
    mask = cmask[:, None] & (p < hw)[None, :]
    ptr = y_ptr + n.to(tl.int64) * channels * hw + c[:, None] * hw + p[None, :]
    v = tl.load(ptr, mask=mask, other=0.0) + tl.load(b_ptr + c, mask=cmask, other=0.0)[:, None]
    mean = tl.sum(tl.where(mask, v, 0.0), axis=0) / channels
    tl.store(ptr, tl.maximum(v - mean[None, :], 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        bc = triton.next_power_of_2(c)
        bp = max(1, min(triton.next_power_of_2(h * w), 4096 // bc))
        bias_center_relu_kernel[(n, triton.cdiv(h * w, bp))](y, self.conv.bias, c, h * w, BC=bc, BP=bp)
        return y
