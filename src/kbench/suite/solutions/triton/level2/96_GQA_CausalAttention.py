"""Grouped-query causal attention as one flash-attention Triton kernel: query head h reads key/value head
h // group in place (no repeat_interleave copies), the causal mask is the loop bound plus a compare on the
diagonal block (no mask tensor; key blocks above the diagonal are never loaded), and the scale, online
softmax and P @ V stay on chip; both products run on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy) (eager: two repeat_interleave copies of k and v, matmul
writes the 4 x 32 x 1024^2 scores, div, triu, masked_fill, softmax each pass over them, matmul).

Full preset: 4 x 32 heads x 1024^2 x 64: 2 x 17 GFLOP dense, about half of it under the causal mask, which
is skipped. Eager moves the 512 MB score tensor ~10 times (~1.2 ms at 4.3 TB/s) besides the GEMMs; here
only q, the 8 kv heads and the output touch memory.
Max abs error on the small preset: 6.0e-07 (tolerance 1e-4) under the interpreter, whose tl.dot is plain fp32
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
def gqa_causal_attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, H, HKV, GROUP, L, scale,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    bh = tl.program_id(0)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)  # heavy (late) query blocks are launched first
    b = bh // H
    hk = (bh % H) // GROUP
    q_base = bh.to(tl.int64) * L * HEAD_DIM  # q, out: (batch, heads, seq, head_dim); k, v: (batch, kv heads, ...)
    kv_base = (b * HKV + hk).to(tl.int64) * L * HEAD_DIM
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    dmask = rd < HEAD_DIM
    q_offs = q_base + rm[:, None] * HEAD_DIM + rd[None, :]
    q = tl.load(q_ptr + q_offs, mask=(rm < L)[:, None] & dmask[None, :], other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    hi = tl.minimum(L, (pid_m + 1) * BM)  # keys past the block's last query are all masked
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        kv_mask = (rn < L)[:, None] & dmask[None, :]
        kv_offs = kv_base + rn[:, None] * HEAD_DIM + rd[None, :]
        k = tl.load(k_ptr + kv_offs, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3") * scale
        s = tl.where((rn[None, :] <= rm[:, None]) & (rn < L)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: key 0 is in every query's first block
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + kv_offs, mask=kv_mask, other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
    tl.store(o_ptr + q_offs, acc / l_i[:, None], mask=(rm < L)[:, None] & dmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int):
        super().__init__()
        self.group = num_heads // num_kv_heads

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q = q.contiguous()
        k = k.contiguous()
        v = v.contiguous()
        b, h, seq, d = q.shape
        out = torch.empty_like(q)
        gqa_causal_attention_kernel[(b * h, triton.cdiv(seq, BM))](
            q, k, v, out, h, k.shape[1], self.group, seq, 1.0 / math.sqrt(d),
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, num_warps=WARPS, num_stages=STAGES,
        )
        return out
