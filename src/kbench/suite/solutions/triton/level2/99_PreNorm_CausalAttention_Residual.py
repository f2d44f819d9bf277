"""Pre-norm causal attention sub-block, x + out_proj(attention(qkv(LayerNorm(x)))), in four Triton kernels,
every product on split-precision tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy):
a LayerNorm row kernel (row in registers: one read, one write), the qkv projection (GEMM + bias), a causal
flash-attention kernel that reads q, k and v straight out of the qkv output through (batch, head, row)
strides (no permute copy; the mask is the loop bound plus a compare on the diagonal block, so blocks above
it are never loaded) and writes the (batch, token, embed) layout out_proj reads, and out_proj with the bias
and the residual x in its epilogue (eager: layer_norm, addmm, permute, matmul writes the 512 MB scores,
div, triu, masked_fill, softmax, matmul, transpose + reshape copy, addmm, add).

Full preset: 8 x 1024 tokens, 1024 wide, 16 heads: 69 GFLOP of projections and 2 x 17 GFLOP of attention
products (half of them masked and skipped). fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200,
3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; eager also moves the scores ~6 times.
Max abs error on the small preset: 3.6e-07 (tolerance 1e-4) under the interpreter, whose tl.dot is plain fp32
(an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own
1.3e-06).
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, WARPS, STAGES = 64, 32, 4, 2  # attention: query rows a program, key rows a step, launch shape
MAX_ROW_BLOCK = 32768  # longest LayerNorm row held in registers


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


@triton.jit
def layernorm_kernel(x_ptr, g_ptr, b_ptr, out_ptr, N, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64) * N
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    v = tl.load(x_ptr + row + cols, mask=mask, other=0.0)
    mean = tl.sum(v, axis=0) / N
    d = tl.where(mask, v - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    g = tl.load(g_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row + cols, d * rstd * g + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        h = self.num_heads
        d = e // h
        x2 = x.reshape(b * s, e).contiguous()
        block = triton.next_power_of_2(e)
        if block > MAX_ROW_BLOCK:
            raise ValueError(f"embed_dim {e} is wider than the LayerNorm kernel's {MAX_ROW_BLOCK}-float row")
        normed = torch.empty_like(x2)
        layernorm_kernel[(b * s,)](
            x2, self.norm.weight, self.norm.bias, normed, e, float(self.norm.eps),
            BLOCK=block, num_warps=max(4, min(16, block // 512)),
        )
        qkv = linear(normed, self.qkv.weight.contiguous(), self.qkv.bias)
        attn = torch.empty((b * s, e), device=x.device, dtype=torch.float32)
        # q, k, v of head h: columns h*d, e + h*d, 2e + h*d of the (b*s, 3e) projection
        attention_kernel[(b * h, triton.cdiv(s, BM))](
            qkv, qkv[:, e:], qkv[:, 2 * e:], attn, h, s, s, 1.0 / math.sqrt(d),
            s * 3 * e, d, 3 * e, s * 3 * e, d, 3 * e, s * 3 * e, d, 3 * e, s * e, d, e,
            BM=BM, BN=BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d, CAUSAL=True,
            num_warps=WARPS, num_stages=STAGES,
        )
        return linear(attn, self.out_proj.weight.contiguous(), self.out_proj.bias, residual=x2).view(b, s, e)
