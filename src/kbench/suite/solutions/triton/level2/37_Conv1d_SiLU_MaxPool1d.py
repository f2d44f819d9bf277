"""Conv1d + SiLU + MaxPool1d: cuDNN convolution without its bias, then one Triton kernel adds the per-channel
bias, applies SiLU and takes the max over each pooling window, writing only the pooled output (eager: conv +
bias, silu, max_pool1d -> 4 passes over the 537 MB conv output at the full size and a 268 MB write; here one
read of it and the 268 MB write: 0.8 GB of HBM traffic instead of 2.4 GB). SiLU is not monotonic (minimum at x
= -1.28), so the activation is applied to every element before the max, not after.

The convolution (103 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
6.0e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_silu_maxpool_kernel(
    y_ptr, b_ptr, out_ptr, length, lout, channels, POOL: tl.constexpr, BLOCK: tl.constexpr, P2: tl.constexpr
):
    # program (row = sample * channels + channel, block of pooled outputs)
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    t = tl.arange(0, P2)
    mask = (j < lout)[:, None] & (t < POOL)[None, :]
    src = y_ptr + row.to(tl.int64) * length + j[:, None] * POOL + t[None, :]
    v = tl.load(src, mask=mask, other=0.0) + tl.load(b_ptr + row % channels)
    v = tl.where(mask, v * tl.sigmoid(v), float("-inf"))
    tl.store(out_ptr + row.to(tl.int64) * lout + j, tl.max(v, axis=1), mask=j < lout)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv1d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, length = y.shape
        lout = length // self.pool_size
        out = torch.empty((n, c, lout), device=y.device, dtype=y.dtype)
        block = 1024 // triton.next_power_of_2(self.pool_size)
        grid = (n * c, triton.cdiv(lout, block))
        bias_silu_maxpool_kernel[grid](
            y, self.conv.bias, out, length, lout, c,
            POOL=self.pool_size, BLOCK=block, P2=triton.next_power_of_2(self.pool_size),
        )
        return out
