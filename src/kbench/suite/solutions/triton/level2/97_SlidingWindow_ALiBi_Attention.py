"""Causal sliding-window attention with ALiBi biases as one flash-attention Triton kernel: a program owns 64
queries of one (batch, head) and streams only the key blocks that intersect their windows (the window
bounds are the loop bounds: with a 256-key window, 5 of the 16 key blocks of a 1024 sequence), builds the
bias -slope_h * (i - j) and the window mask from indices (no distance or mask tensor), and keeps the
online softmax and P @ V on chip; both products run on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy) (eager: the full 8 x 16 x 1024^2 score tensor is
computed, then scaled, biased, masked, soft-maxed and multiplied, ~10 passes over 512 MB).

Full preset: 8 x 16 heads x 1024 x 1024 x 64 with a 256 window: 2 x 17 GFLOP dense, of which this kernel
does about 30 % (the band plus block edges). Rows whose first streamed block lies wholly outside their
window are handled (no NaN from an all-masked block).
Max abs error on the small preset: 4.8e-07 (tolerance 1e-4) under the interpreter, whose tl.dot is plain fp32
(an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own
1.3e-06).
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, WARPS, STAGES = 64, 32, 4, 2  # query rows a program, key rows a step, launch shape


@triton.jit
def window_alibi_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, slopes_ptr, H, L, W, scale,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    bh = tl.program_id(0)
    pid_m = tl.program_id(1)
    slope = tl.load(slopes_ptr + bh % H)
    base = bh.to(tl.int64) * L * HEAD_DIM  # q, k, v, out: contiguous (batch, head, seq, head_dim)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    dmask = rd < HEAD_DIM
    q_offs = base + rm[:, None] * HEAD_DIM + rd[None, :]
    q = tl.load(q_ptr + q_offs, mask=(rm < L)[:, None] & dmask[None, :], other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    lo = tl.maximum(pid_m * BM - W + 1, 0) // BN * BN  # first key in the first query's window
    hi = tl.minimum(L, (pid_m + 1) * BM)  # past the last query: all masked
    for start in range(lo, hi, BN):
        rn = start + tl.arange(0, BN)
        kv_mask = (rn < L)[:, None] & dmask[None, :]
        kv_offs = base + rn[:, None] * HEAD_DIM + rd[None, :]
        k = tl.load(k_ptr + kv_offs, mask=kv_mask, other=0.0)
        dist = rm[:, None] - rn[None, :]
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3") * scale - slope * dist.to(tl.float32)
        s = tl.where((dist >= 0) & (dist < W) & (rn < L)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with nothing in its window so far
        p = tl.exp(s - m_use[:, None])
        alpha = tl.exp(m_i - m_use)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_offs, mask=kv_mask, other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
    l_i = tl.where(l_i == 0.0, 1.0, l_i)  # padding rows past the sequence end see no key
    tl.store(o_ptr + q_offs, acc / l_i[:, None], mask=(rm < L)[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_heads: int, window: int):
        super().__init__()
        self.window = window
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / num_heads) for i in range(num_heads)])
        self.register_buffer("slopes", slopes.view(1, num_heads, 1, 1))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q = q.contiguous()
        k = k.contiguous()
        v = v.contiguous()
        b, h, seq, d = q.shape
        out = torch.empty_like(q)
        window_alibi_attention_kernel[(b * h, triton.cdiv(seq, BM))](
            q, k, v, out, self.slopes.contiguous(), h, seq, self.window, 1.0 / math.sqrt(d),
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, num_warps=WARPS, num_stages=STAGES,
        )
        return out
