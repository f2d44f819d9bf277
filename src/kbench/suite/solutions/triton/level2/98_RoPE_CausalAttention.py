"""Rotary embedding + causal attention as one flash-attention Triton kernel: the rotation is applied to each
q and k tile as it is loaded (the partner half read with a permuted column index, the angles pos * inv_freq
and their cos/sin computed in registers), so the rotated q and k never reach memory; the causal mask is the
loop bound plus a compare on the diagonal block, and the scale, online softmax and P @ V stay on chip;
both products run on split-precision tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level
accuracy) (eager: ~12 kernels for the cos/sin tables, rotations and concatenations of q and k, then
matmul writes the 512 MB score tensor, div, triu, masked_fill, softmax, matmul).

Full preset: 8 x 16 heads x 1024^2 x 64: 2 x 17 GFLOP dense, about half skipped by the mask. Memory
traffic is q, k, v and the output (4 x 32 MB, k and v re-read from L2).
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
def rope_tile(ptr, rows, L, inv_freq_ptr, D: tl.constexpr, HEAD_DIM: tl.constexpr):
    """x * cos + rotate_half(x) * sin for the (rows, head_dim) tile at ptr (row stride HEAD_DIM)."""
    HALF: tl.constexpr = HEAD_DIM // 2
    rd = tl.arange(0, D)
    mask = (rows < L)[:, None] & (rd < HEAD_DIM)[None, :]
    x = tl.load(ptr + rows[:, None] * HEAD_DIM + rd[None, :], mask=mask, other=0.0)
    partner = tl.where(rd < HALF, rd + HALF, rd - HALF)
    xr = tl.load(ptr + rows[:, None] * HEAD_DIM + partner[None, :], mask=mask, other=0.0)
    xr = tl.where((rd < HALF)[None, :], -xr, xr)
    inv = tl.load(inv_freq_ptr + rd % HALF, mask=rd < HEAD_DIM, other=0.0)
    angle = rows.to(tl.float32)[:, None] * inv[None, :]
    return x * tl.cos(angle) + xr * tl.sin(angle)


@triton.jit
def rope_causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, inv_freq_ptr, L, scale,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    bh = tl.program_id(0)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)  # heavy (late) query blocks are launched first
    base = bh.to(tl.int64) * L * HEAD_DIM  # q, k, v, out: contiguous (batch, head, seq, head_dim)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    dmask = rd < HEAD_DIM
    q = rope_tile(q_ptr + base, rm, L, inv_freq_ptr, D, HEAD_DIM)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    hi = tl.minimum(L, (pid_m + 1) * BM)
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        k = rope_tile(k_ptr + base, rn, L, inv_freq_ptr, D, HEAD_DIM)
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3") * scale
        s = tl.where((rn[None, :] <= rm[:, None]) & (rn < L)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: key 0 is in every query's first block
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + rn[:, None] * HEAD_DIM + rd[None, :], mask=(rn < L)[:, None] & dmask[None, :], other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
    tl.store(o_ptr + base + rm[:, None] * HEAD_DIM + rd[None, :], acc / l_i[:, None], mask=(rm < L)[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, head_dim: int, base: float):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q = q.contiguous()
        k = k.contiguous()
        v = v.contiguous()
        b, h, seq, d = q.shape
        out = torch.empty_like(q)
        rope_causal_attention_kernel[(b * h, triton.cdiv(seq, BM))](
            q, k, v, out, self.inv_freq.contiguous(), seq, 1.0 / math.sqrt(d),
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, num_warps=WARPS, num_stages=STAGES,
        )
        return out
