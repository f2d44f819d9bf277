"""ConvTranspose1d + hardtanh + AvgPool1d: cuDNN transposed convolution without its bias, then one Triton
kernel adds the per-channel bias, clamps to [-0.5, 0.5] and averages each pooling window, writing only the
pooled output (eager: conv_transpose + bias, hardtanh, avg_pool1d -> 4 passes over the 268 MB conv output at
the full size and a 134 MB write; here one read of it and the 134 MB write).

The transposed convolution (69 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 0
(every output saturates or matches bit for bit)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_hardtanh_avgpool_kernel(
    y_ptr, b_ptr, out_ptr, length, lout, channels, POOL: tl.constexpr, BLOCK: tl.constexpr, P2: tl.constexpr
):
    # program (row = sample * channels + channel, block of pooled outputs)
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    t = tl.arange(0, P2)
    mask = (j < lout)[:, None] & (t < POOL)[None, :]
    src = y_ptr + row.to(tl.int64) * length + j[:, None] * POOL + t[None, :]
    v = tl.load(src, mask=mask, other=0.0) + tl.load(b_ptr + row % channels)
    v = tl.where(mask, tl.minimum(tl.maximum(v, -0.5), 0.5), 0.0)
    tl.store(out_ptr + row.to(tl.int64) * lout + j, tl.sum(v, axis=1) * (1.0 / POOL), mask=j < lout)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, pool_size: int
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose1d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        n, c, length = y.shape
        lout = length // self.pool_size
        out = torch.empty((n, c, lout), device=y.device, dtype=y.dtype)
        p2 = triton.next_power_of_2(self.pool_size)
        block = 1024 // p2
        bias_hardtanh_avgpool_kernel[(n * c, triton.cdiv(lout, block))](
            y, ct.bias, out, length, lout, c, POOL=self.pool_size, BLOCK=block, P2=p2
        )
        return out
