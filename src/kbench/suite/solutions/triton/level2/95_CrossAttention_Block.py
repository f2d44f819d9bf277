"""Cross-attention block in four Triton kernels, every product on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy): the q projection and the fused k/v projection (GEMM +
bias epilogue each), a flash-attention kernel that reads q, k and v straight out of the projection outputs
through (batch, head, row) strides and writes its result in the (batch, query, embed) layout that
out_proj reads, and the output projection (GEMM + bias). The 8 x 16 x 1024 x 1024 attention weights never
reach memory, and no head permute or reshape copy is made (eager: 3 addmm, view/permute, matmul writes
the 512 MB scores, div, softmax, matmul, a transpose + reshape copy, addmm).

Full preset: 4 projections of 8192 x 1024 x 1024 (4 x 17 GFLOP, two of them as one 8192 x 2048 GEMM) and
2 x 17 GFLOP of attention products. fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200, 3xTF32
by ~165 TFLOP/s of fp32-accurate tensor-core work; eager also moves the 512 MB score tensor ~5 times.
Max abs error on the small preset: 1.2e-07 (tolerance 1e-4) under the interpreter, whose tl.dot is plain fp32
(an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own
1.3e-06).
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, WARPS, STAGES = 64, 32, 4, 2  # attention: query rows a program, key rows a step, launch shape


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
def gemm_tile(a_ptr, b_ptr, pid_m, pid_n, M, N, K, s_am, s_ak, s_bn, s_bk,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 (BM, BN) tile of A @ B^T (A is M x K, B is N x K, any strides) on 3xTF32 tensor cores.
    Out-of-range rows/columns read row/column 0 (in bounds) and are masked by the caller's store."""
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a_ptr + rm.to(tl.int64)[:, None] * s_am + rk[None, :] * s_ak
    pb = b_ptr + rn.to(tl.int64)[None, :] * s_bn + rk[:, None] * s_bk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pb)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pb, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        pa += BK * s_ak
        pb += BK * s_bk
    return acc


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    RESIDUAL: tl.constexpr,
):
    """out = x @ w^T + b (+ r when RESIDUAL), row-major M x N."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    acc = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if RESIDUAL:
        y += tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 128, 32
    linear_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w, b, out if residual is None else residual, out, m, n, k,
        BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, RESIDUAL=residual is not None, num_warps=8, num_stages=3,
    )
    return out


@triton.jit
def attention_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, H, LQ, LK, scale,
    sq_b, sq_h, sq_m, sk_b, sk_h, sk_n, sv_b, sv_h, sv_n, so_b, so_h, so_m,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr,
):
    """Flash attention for one (batch, head) and BM queries; q, k, v and out are read and written in place
    through (batch, head, row) strides (the head-dim stride is 1), so projections need no head permutes."""
    bh = tl.program_id(0)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    if CAUSAL:
        pid_m = tl.num_programs(1) - 1 - tl.program_id(1)  # heavy (late) query blocks are launched first
    else:
        pid_m = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rd = tl.arange(0, D)
    dmask = rd < HEAD_DIM
    qmask = (rm < LQ)[:, None] & dmask[None, :]
    q = tl.load(q_ptr + b * sq_b + h * sq_h + rm.to(tl.int64)[:, None] * sq_m + rd[None, :], mask=qmask, other=0.0)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], dtype=tl.float32)
    acc = tl.zeros((BM, D), dtype=tl.float32)
    if CAUSAL:
        hi = tl.minimum(LK, (pid_m + 1) * BM)  # keys past the block's last query are all masked
    else:
        hi = LK
    for start in range(0, hi, BN):
        rn = start + tl.arange(0, BN)
        kv_mask = (rn < LK)[:, None] & dmask[None, :]
        k = tl.load(k_ptr + b * sk_b + h * sk_h + rn.to(tl.int64)[:, None] * sk_n + rd[None, :], mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3") * scale
        valid = (rn < LK)[None, :]
        if CAUSAL:
            valid = valid & (rn[None, :] <= rm[:, None])
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: key 0 is in every query's first block
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + b * sv_b + h * sv_h + rn.to(tl.int64)[:, None] * sv_n + rd[None, :], mask=kv_mask, other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
    tl.store(o_ptr + b * so_b + h * so_h + rm.to(tl.int64)[:, None] * so_m + rd[None, :], acc / l_i[:, None], mask=qmask)


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.kv_proj = nn.Linear(embed_dim, 2 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        c = context.shape[1]
        h = self.num_heads
        d = e // h
        q = linear(x.reshape(b * s, e).contiguous(), self.q_proj.weight.contiguous(), self.q_proj.bias)
        kv = linear(context.reshape(b * c, e).contiguous(), self.kv_proj.weight.contiguous(), self.kv_proj.bias)
        attn = torch.empty((b * s, e), device=x.device, dtype=torch.float32)
        # q[b, i, h*d + j]; k[b, t, h*d + j] and v[b, t, e + h*d + j] in the (b*c, 2e) k/v projection
        attention_kernel[(b * h, triton.cdiv(s, BM))](
            q, kv, kv[:, e:], attn, h, s, c, 1.0 / math.sqrt(d),
            s * e, d, e, c * 2 * e, d, 2 * e, c * 2 * e, d, 2 * e, s * e, d, e,
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, CAUSAL=False,
            num_warps=WARPS, num_stages=STAGES,
        )
        return linear(attn, self.out_proj.weight.contiguous(), self.out_proj.bias).view(b, s, e)
