"""Entropy of each row's softmax in one Triton pass over the input, rewritten exactly: with m the row max,
e_i = exp(x_i - m) and S = sum e_i, -sum p_i log p_i = log S - sum e_i (x_i - m) / S. A program walks its row
in chunks keeping m, S and T = sum e_i (x_i - m) online (on a new max m', S and T are rescaled by
exp(m - m') and T also shifts by (m - m') S), so the row is read once and nothing but one float per row is
written (eager: softmax and log_softmax each read the 16384 x 8192 input twice and write it, mul writes
the product, sum reads it: ~4 reads + 3 writes of 512 MB).

Full preset: 16384 x 8192: 512 MB read once (~0.12 ms at 4.3 TB/s); rows up to 8192 floats are one chunk
held in registers. Max abs error on the small preset (interpreter): 9.5e-07 (tolerance 1e-4).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 8192  # chunk of a row per step


@triton.jit
def softmax_entropy_kernel(x_ptr, out_ptr, N, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    m = tl.full([BLOCK], float("-inf"), tl.float32)  # per-lane online statistics
    s = tl.zeros([BLOCK], dtype=tl.float32)
    t = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row + cols, mask=cols < N, other=float("-inf"))
        m_new = tl.maximum(m, x)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        dm = tl.where(m == float("-inf"), 0.0, m - m_use)  # a lane with nothing yet has s = t = 0
        a = tl.exp(dm)
        e = tl.exp(x - m_use)  # 0 for padding
        t = a * (t + dm * s) + e * tl.where(cols < N, x - m_use, 0.0)
        s = a * s + e
        m = m_new
    top = tl.max(m, axis=0)
    dtop = tl.where(m == float("-inf"), 0.0, m - top)  # lanes to the row max
    w = tl.exp(dtop)
    total = tl.sum(w * s, axis=0)
    tsum = tl.sum(w * (t + dtop * s), axis=0)
    tl.store(out_ptr + tl.program_id(0), tl.log(total) - tsum / total)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        out = torch.empty(x.shape[:-1], device=x.device, dtype=torch.float32)
        block = min(BLOCK, triton.next_power_of_2(n))
        softmax_entropy_kernel[(x.numel() // n,)](x, out, n, BLOCK=block, num_warps=max(1, min(16, block // 512)))
        return out
