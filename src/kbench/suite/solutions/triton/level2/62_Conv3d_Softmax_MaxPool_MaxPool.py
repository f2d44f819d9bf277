"""Conv3d + softmax over channels + MaxPool3d(2) + MaxPool3d(2): cuDNN convolution without its bias, then one
Triton kernel. Two 2x2x2 max poolings in floor mode are one 4x4x4 max pooling (the second pool's window i
covers exactly the conv voxels 4i .. 4i+3 on every axis, and both drop the same trailing voxels), so each
program holds a [channels x pooled voxels] tile of one sample, walks the 64 taps of its windows, takes the
softmax over the channels of each conv voxel (bias added on the fly) and keeps the running max. Only the
pooled output (6.5 MB at the full size) is written; the 472 MB conv output is read once (87 % of it: the
windows skip the trailing voxels). Eager adds the bias (read + write), runs softmax (read + write) and two
poolings (the first reads 472 MB and writes 59 MB).

The convolution (51 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
1.5e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def softmax_maxpool4_kernel(y_ptr, b_ptr, out_ptr, channels, depth, height, width, od, oh, ow,
                            BC: tl.constexpr, BV: tl.constexpr):
    n = tl.program_id(0)
    o = tl.program_id(1) * BV + tl.arange(0, BV)
    npool = od * oh * ow
    vmask = o < npool
    c = tl.arange(0, BC)
    cmask = c < channels
    mask = cmask[:, None] & vmask[None, :]
    vol = depth * height * width
    corner = (o // (oh * ow)) * 4 * height * width + ((o // ow) % oh) * 4 * width + (o % ow) * 4
    base = y_ptr + n.to(tl.int64) * channels * vol + c[:, None] * vol + corner[None, :]
    bias = tl.load(b_ptr + c, mask=cmask, other=0.0)[:, None]
    best = tl.zeros([BC, BV], dtype=tl.float32)  # probabilities are > 0
    for t in range(0, 64):
        off = (t // 16) * height * width + ((t // 4) % 4) * width + t % 4
        v = tl.load(base + off, mask=mask, other=0.0) + bias
        v = tl.where(cmask[:, None], v, float("-inf"))
        e = tl.exp(v - tl.max(v, axis=0)[None, :])
        best = tl.maximum(best, e / tl.sum(e, axis=0)[None, :])
    tl.store(out_ptr + n.to(tl.int64) * channels * npool + c[:, None] * npool + o[None, :], best, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, d, h, w = y.shape
        od, oh, ow = d // 2 // 2, h // 2 // 2, w // 2 // 2
        out = torch.empty((n, c, od, oh, ow), device=y.device, dtype=y.dtype)
        bc = triton.next_power_of_2(c)
        bv = max(1, min(triton.next_power_of_2(od * oh * ow), 2048 // bc))
        softmax_maxpool4_kernel[(n, triton.cdiv(od * oh * ow, bv))](
            y, self.conv.bias, out, c, d, h, w, od, oh, ow, BC=bc, BV=bv
        )
        return out
