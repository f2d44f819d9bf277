"""Grouped Conv2d + channel shuffle + ReLU: cuDNN grouped convolution without its bias, then one Triton kernel
writes each output plane straight from its source plane: output channel j * groups + g is conv channel g * (C
/ groups) + j, so the shuffle is only an index map on whole planes (contiguous reads and writes), with the
bias and ReLU applied on the way. At the full size the 537 MB conv output is read once and the output written
once; eager adds the bias (read + write), materializes the transposed view with a copy (read + write) and
applies relu (read + write).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 0
(bit-identical)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def shuffle_bias_relu_kernel(y_ptr, b_ptr, out_ptr, channels, groups, hw, BLOCK: tl.constexpr):
    # program (output plane = sample * channels + j * groups + g, block)
    oplane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    n = oplane // channels
    oc = oplane % channels
    src_c = (oc % groups) * (channels // groups) + oc // groups
    v = tl.load(y_ptr + (n * channels + src_c).to(tl.int64) * hw + offs, mask=mask) + tl.load(b_ptr + src_c)
    tl.store(out_ptr + oplane.to(tl.int64) * hw + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, groups=groups)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cv = self.conv
        y = F.conv2d(x, cv.weight, None, cv.stride, cv.padding, cv.dilation, cv.groups).contiguous()
        n, c, h, w = y.shape
        out = torch.empty_like(y)
        block = min(1024, triton.next_power_of_2(h * w))
        shuffle_bias_relu_kernel[(n * c, triton.cdiv(h * w, block))](
            y, cv.bias, out, c, self.groups, h * w, BLOCK=block
        )
        return out
