"""Softplus + row-wise cumulative sum in one Triton pass: a program owns a row and walks it in 4096-wide
chunks, applying softplus (torch's: x above 20 passes through, else log(1 + exp(x)), here in the
overflow-free form max(x, 0) + log(1 + exp(-|x|))), scanning the chunk with `tl.cumsum` and adding the
running total of the chunks before it (eager: softplus writes the 16384 x 16384 tensor, cumsum reads it
and writes: 2 reads + 2 writes of 1 GB).

Full preset: 16384 x 16384: 1 GB read and 1 GB written, the minimum (~0.5 ms at 4.3 TB/s), one program
per row. Max abs error on the small preset (interpreter): 1.5e-04 (values up to ~250; tolerance 1e-3
relative).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096  # chunk of a row per step


@triton.jit
def softplus_cumsum_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    carry = tl.zeros([1], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + row + cols, mask=mask, other=0.0)
        sp = tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))
        sp = tl.where(mask & (x <= 20.0), sp, tl.where(mask, x, 0.0))
        scan = tl.cumsum(sp, axis=0) + carry
        tl.store(out_ptr + row + cols, scan, mask=mask)
        carry += tl.sum(sp, axis=0)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        out = torch.empty_like(x)
        block = min(BLOCK, triton.next_power_of_2(n))
        softplus_cumsum_kernel[(x.numel() // n,)](x, out, n, BLOCK=block, num_warps=max(1, min(8, block // 256)))
        return out
