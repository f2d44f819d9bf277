"""Conv2d + ELU + adaptive max pooling: cuDNN convolution without its bias, then one Triton kernel: ELU is
increasing, so the max of elu(y + b) over a window is elu(max y + b); each program takes one output cell of
one plane, reads its adaptive window (rows floor(i H / O) .. ceil((i + 1) H / O), likewise columns) as one
masked tile, and writes one value. At the full size the 268 MB conv output is read once and 1 MB written;
eager adds the bias (read + write), applies elu (read + write) and pools (read).

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
def elu_adaptive_maxpool_kernel(y_ptr, b_ptr, out_ptr, channels, height, width, osize,
                                BH: tl.constexpr, BW: tl.constexpr):
    plane = tl.program_id(0)
    cell = tl.program_id(1)
    i = cell // osize
    j = cell % osize
    h0 = (i * height) // osize
    h1 = ((i + 1) * height + osize - 1) // osize
    w0 = (j * width) // osize
    w1 = ((j + 1) * width + osize - 1) // osize
    r = h0 + tl.arange(0, BH)
    q = w0 + tl.arange(0, BW)
    mask = (r < h1)[:, None] & (q < w1)[None, :]
    src = y_ptr + plane.to(tl.int64) * height * width + r[:, None] * width + q[None, :]
    m = tl.max(tl.max(tl.load(src, mask=mask, other=float("-inf")), axis=1), axis=0)
    v = m + tl.load(b_ptr + plane % channels)
    tl.store(out_ptr + plane.to(tl.int64) * osize * osize + cell, tl.where(v > 0, v, tl.exp(v) - 1.0))


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, output_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.output_size = output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        o = self.output_size
        out = torch.empty((n, c * o * o), device=y.device, dtype=y.dtype)
        # windows span H / O rows when O divides H, else at most ceil(H / O) + 1 (likewise columns)
        bh = triton.next_power_of_2(h // o if h % o == 0 else triton.cdiv(h, o) + 1)
        bw = triton.next_power_of_2(w // o if w % o == 0 else triton.cdiv(w, o) + 1)
        elu_adaptive_maxpool_kernel[(n * c, o * o)](y, self.conv.bias, out, c, h, w, o, BH=bh, BW=bw)
        return out
