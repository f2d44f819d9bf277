"""Multi-head self-attention block in three Triton kernels: the qkv projection (GEMM + bias epilogue), a
flash-attention kernel that reads q, k and v straight out of the projection output through (batch, head,
row) strides and writes its result in the (batch, token, embed) layout the output projection reads, and the
output projection (GEMM + bias epilogue). Each attention program owns 128 queries of one (batch, head),
streams keys and values in 64-row blocks and keeps the scores, the 1/sqrt(d) scale, an online softmax and
P @ V on chip; only the last, partial key block is masked. The 8 x 16 x 1024^2 attention weights (512 MB)
never reach memory and no head permute or merge copy is made (eager: addmm, view/permute, matmul writes the
scores, div, softmax, matmul, a transpose + reshape copy, addmm).

Full preset: 8 x 1024 tokens, 1024 wide, 16 heads of 64: 69 GFLOP of projections and 2 x 17 GFLOP of
attention products, all on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32 operand is split into
a TF32 high part and a TF32 residual and the three significant cross products are accumulated in fp32), which
keeps fp32-level accuracy -- far inside the 1e-4 tolerance -- where cuBLAS with TF32 off runs on the fp32
SIMT units (~75 % of their ~67 TFLOP/s peak, the ceiling the eager and compiled references share). The
softmax works in base 2 with log2(e) / sqrt(d) folded into one scale: exact algebra, fp32 rounding only.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
1.2e-7."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, WARPS, STAGES = 128, 64, 8, 2  # attention: query rows a program, key rows a step, launch shape
# At head_dim 64 ptxas (sm_90) gives this shape 255 registers a thread and spills only outside the key loops
# (16-56 bytes); 128 x 128 spills ~400 bytes. One 128 x 64 block is thousands of cycles of tensor-core work,
# which hides the next block's L2 load: 2 stages suffice and keep shared memory at 128 KB.


@triton.jit
def tile_ids(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program; GROUP_M row blocks share each band of W tiles in L2."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % size_m, (pid % per_group) // size_m


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = x @ w^T + b; x: M x K, w: N x K, out: M x N, all row-major."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # out-of-range rows/columns read row 0 (in bounds) and are dropped by the store's mask
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    px = x_ptr + rm.to(tl.int64)[:, None] * K + rk[None, :]
    pw = w_ptr + rn.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(px)
            w = tl.load(pw)
        else:
            a = tl.load(px, mask=rk[None, :] < K - k0, other=0.0)
            w = tl.load(pw, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, w, acc, input_precision="tf32x3")
        px += BK
        pw += BK
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, y, mask=(rm < M)[:, None] & (rn < N)[None, :])


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 128, 32
    linear_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w, b, out, m, n, k, BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
    )
    return out


@triton.jit
def attend(acc, l_i, m_i, q, k_ptr, v_ptr, s_kv, lo, hi, L, qk_scale,
           BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr, TAIL: tl.constexpr):
    """Online-softmax update of (acc, l_i, m_i) with key rows [lo, hi), BN at a time; k_ptr and v_ptr point at
    key row 0 of this (batch, head), rows s_kv apart. m_i is in log2 units. Only the TAIL block holds key
    rows >= L."""
    rd = tl.arange(0, D)
    for start in range(lo, hi, BN):
        rn = start + tl.arange(0, BN)
        offs = rn.to(tl.int64)[:, None] * s_kv + rd[None, :]
        if TAIL:
            kv_mask = (rn < L)[:, None] & (rd < HEAD_DIM)[None, :]
        else:
            kv_mask = (rd < HEAD_DIM)[None, :]
        k = tl.load(k_ptr + offs, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3")
        if TAIL:
            s = tl.where((rn < L)[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)  # finite: every block holds a key < L
        p = tl.exp2(s * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + offs, mask=kv_mask, other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def attention_kernel(
    qkv_ptr, o_ptr, H, L, E, qk_scale,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    """qkv: (batch * seq, 3 E) row-major, q/k/v of head h at columns h d, E + h d, 2 E + h d; out: (batch *
    seq, E), head h at columns h d. Program axis 0 is batch * head, axis 1 the query block."""
    b = (tl.program_id(0) // H).to(tl.int64)
    h = (tl.program_id(0) % H).to(tl.int64)
    q_base = qkv_ptr + b * L * 3 * E + h * HEAD_DIM
    rm = tl.program_id(1) * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    q_mask = (rm < L)[:, None] & (rd < HEAD_DIM)[None, :]
    q = tl.load(q_base + rm.to(tl.int64)[:, None] * 3 * E + rd[None, :], mask=q_mask, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    full = L - L % BN
    acc, l_i, m_i = attend(acc, l_i, m_i, q, q_base + E, q_base + 2 * E, 3 * E, 0, full, L, qk_scale,
                           BN, D, HEAD_DIM, False)
    acc, l_i, m_i = attend(acc, l_i, m_i, q, q_base + E, q_base + 2 * E, 3 * E, full, L, L, qk_scale,
                           BN, D, HEAD_DIM, True)
    o_offs = (b * L + rm.to(tl.int64))[:, None] * E + h * HEAD_DIM + rd[None, :]
    tl.store(o_ptr + o_offs, acc / l_i[:, None], mask=q_mask)


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        h = self.num_heads
        d = e // h
        qkv = linear(x.reshape(b * s, e).contiguous(), self.qkv.weight.contiguous(), self.qkv.bias)
        attn = torch.empty((b * s, e), device=x.device, dtype=torch.float32)
        qk_scale = math.log2(math.e) / math.sqrt(d)  # softmax(s / sqrt(d)) = 2^(s qk_scale - max) / sum
        attention_kernel[(b * h, triton.cdiv(s, BM))](
            qkv, attn, h, s, e, qk_scale,
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, num_warps=WARPS, num_stages=STAGES,
        )
        return linear(attn, self.out.weight.contiguous(), self.out.bias).view(b, s, e)
