"""Causal self-attention block (qkv linear, causal attention, output linear), forward and backward, in Triton
GEMM and flash-attention kernels.

Forward: the qkv projection is one GEMM with the bias in its epilogue; a flash-attention kernel reads q, k
and v straight out of the projection output through (batch, head, row) strides (no split, permute or
contiguous copy), keeps the scores, an online softmax and P @ V on chip, and writes its result in the
(token, embed) layout the output GEMM reads, plus each row's log-sum-exp (4 bytes a row); the output
projection is a second GEMM + bias. The (seq x seq) attention weights never reach memory.
Backward: d_att = dy W_out and dW_out = dy^T att are GEMMs (a transposed operand is a stride swap, no copy),
the output bias's gradient (the column sums of dy) accumulated inside the dW_out GEMM from the dy tiles it
loads anyway. The attention backward is one flash-attention-2 kernel: program j owns 64 rows of a
(batch, head) both as queries, for dQ, and as keys, for dK and dV, so every program walks the same number of
blocks; P is recomputed from q, k and the saved log-sum-exp, delta = rowsum(dO * O) from tiles the step
loads anyway, and only the diagonal block needs the causal compare (it serves all three gradients at once).
It writes dq, dk and dv straight into one (token, 3 embed) gradient in the projection's layout, which feeds
dx = dqkv W_qkv and dW_qkv = dqkv^T x (with the qkv bias's gradient fused the same way). Each gradient
element is written once by the program that owns it: no atomics, deterministic. Eager materialises the
scores, their softmax and their gradients (batch x heads x seq^2 floats each) and runs the head split/merge
copies and the bias reductions as separate kernels.
Every product runs on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32 operand split into a TF32
high part and a TF32 residual, the three significant cross products accumulated in fp32), which keeps
fp32-level accuracy where cuBLAS with TF32 off runs on the fp32 SIMT units. The softmax works in base 2:
log2(e) / sqrt(d) is folded into q (or k) once per tile, exact algebra with fp32 rounding only."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

GEMM_BM, GEMM_BN, GEMM_BK, GEMM_WARPS, GEMM_STAGES = 128, 128, 64, 8, 3  # 3 stages of 64 KB of operand tiles
FWD_BM, FWD_BN, FWD_WARPS, FWD_STAGES = 128, 64, 8, 2  # attention forward: query rows a program, key rows a step
BWD_B, BWD_WARPS, BWD_STAGES = 64, 8, 2  # attention backward: rows of the owned block and of each streamed block


# ---------------------------------------------------------------------------------------------- GEMMs
@triton.jit
def matmul_kernel(
    a_ptr, b_ptr, bias_ptr, c_ptr, rowsum_ptr, M, N, K, s_am, s_ak, s_bk, s_bn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, ROWSUM_A: tl.constexpr,
):
    """c (M x N, row-major) = a @ b (+ bias over columns); a[m, k] at m s_am + k s_ak, b[k, n] at k s_bk + n s_bn,
    so a transposed operand is a stride swap. With ROWSUM_A the programs of column block 0 also write the
    row sums of a (over K) to rowsum: a bias gradient from tiles the GEMM loads anyway. Program axis 0 is the
    row block (fastest), so the programs in flight share the b tiles of a few column blocks."""
    pid_n = tl.program_id(1)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # out-of-range rows/columns read row/column 0 (in bounds, no masks in the K loop); stores drop them
    pa = a_ptr + (rm % M).to(tl.int64)[:, None] * s_am + rk[None, :] * s_ak
    pb = b_ptr + rk[:, None] * s_bk + (rn % N).to(tl.int64)[None, :] * s_bn
    a_step = BK * s_ak
    b_step = BK * s_bk
    acc = tl.full([BM, BN], 0.0, tl.float32)
    a_sum = tl.full([BM, BK], 0.0, tl.float32)  # ROWSUM_A: a's tiles summed, reduced over K once at the end
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pb)
        else:
            k_ok = rk < K - k0
            a = tl.load(pa, mask=k_ok[None, :], other=0.0)
            b = tl.load(pb, mask=k_ok[:, None], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        if ROWSUM_A:
            a_sum += a
        pa += a_step
        pb += b_step
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc, mask=(rm < M)[:, None] & (rn < N)[None, :])
    if ROWSUM_A:
        if pid_n == 0:
            tl.store(rowsum_ptr + rm, tl.sum(a_sum, axis=1), mask=rm < M)


def matmul(a, b, bias=None, rowsum=None):
    """a @ b (+ bias) for 2-D views a (M x K) and b (K x N) of any strides; rowsum, if given, gets a's row sums."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    matmul_kernel[(triton.cdiv(m, GEMM_BM), triton.cdiv(n, GEMM_BN))](
        a, b, c if bias is None else bias, c, c if rowsum is None else rowsum, m, n, k,
        a.stride(0), a.stride(1), b.stride(0), b.stride(1),
        BM=GEMM_BM, BN=GEMM_BN, BK=GEMM_BK, EVEN_K=k % GEMM_BK == 0,
        HAS_BIAS=bias is not None, ROWSUM_A=rowsum is not None, num_warps=GEMM_WARPS, num_stages=GEMM_STAGES,
    )
    return c


# ------------------------------------------------------------------------------------------ attention
# q, k, v and their gradients: (batch, head, seq, head_dim) views with strides s_b, s_h, s_row, 1; o and dO:
# strides o_b, o_h, o_row, 1; lse: (batch * head, seq), contiguous. Program axis 0 is batch * head. Head
# dimensions that are not a power of 2 are padded to D with masked (zero) columns.
# Scores are kept in log2 units: the operand that stays on chip (q, or k for dK/dV) is scaled once by
# qk_scale = log2(e) / sqrt(d), so that exp(s / sqrt(d)) = 2^(its product).
@triton.jit
def attention_forward_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, H, L, s_b, s_h, s_row, o_b, o_h, o_row, qk_scale,
    BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    """One program per BM queries (heaviest blocks first): keys and values stream in BN-row blocks through an
    online softmax; writes o and lse = m_i + log2(l_i), the log2-domain log-sum-exp of each row's scores.
    The causal mask is the loop's bound (key blocks past the last query are never loaded) plus a compare,
    which also hides key rows >= L."""
    bh = tl.program_id(0)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    pid_m = tl.num_programs(1) - 1 - tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rm_col = rm[:, None]
    rm64 = rm_col.to(tl.int64)
    rd = tl.arange(0, D)[None, :]
    q_mask = rm_col < L
    if HEAD_DIM < D:
        q_mask = q_mask & (rd < HEAD_DIM)
    base = b * s_b + h * s_h
    q = tl.load(q_ptr + base + rm64 * s_row + rd, mask=q_mask, other=0.0) * qk_scale
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.full([BM], 0.0, tl.float32)
    acc = tl.full([BM, D], 0.0, tl.float32)
    rn = tl.arange(0, BN)
    kv_offs = base + rn.to(tl.int64)[:, None] * s_row + rd
    k_ptrs = k_ptr + kv_offs
    v_ptrs = v_ptr + kv_offs
    step = BN * s_row
    for _ in range(0, tl.minimum(L, (pid_m + 1) * BM), BN):
        kv_mask = rn[:, None] < L
        if HEAD_DIM < D:
            kv_mask = kv_mask & (rd < HEAD_DIM)
        k = tl.load(k_ptrs, mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k), input_precision="tf32x3")
        s = tl.where(rn[None, :] <= rm_col, s, float("-inf"))  # key > query hidden (keys >= L too)
        m_new = tl.maximum(m_i, tl.max(s, axis=1))  # finite: key 0 is in every row's first block
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptrs, mask=kv_mask, other=0.0)
        acc = tl.dot(p, v, acc * alpha[:, None], input_precision="tf32x3")
        m_i = m_new
        rn += BN
        k_ptrs += step
        v_ptrs += step
    tl.store(o_ptr + (b * o_b + h * o_h) + rm64 * o_row + rd, acc / l_i[:, None], mask=q_mask)
    tl.store(lse_ptr + bh * L + rm, m_i + tl.log2(l_i), mask=rm < L)


@triton.jit
def attention_backward_kernel(
    q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, dq_ptr, dk_ptr, dv_ptr, H, L, s_b, s_h, s_row, o_b, o_h, o_row,
    qk_scale, sm_scale, B: tl.constexpr, D: tl.constexpr, HEAD_DIM: tl.constexpr,
):
    """Program (bh, j) owns rows [j B, (j + 1) B) twice: as queries it writes dQ = sm_scale dS K over the keys
    at or before them, as keys dV = P^T dO and dK = sm_scale dS^T Q over the queries at or after them, with
    P recomputed from the saved lse and dS = P (dO V^T - delta), delta = rowsum(dO * O) taken from the dO and
    O tiles at hand. The diagonal block (these queries against these keys, the only one that needs the
    causal compare) serves all three gradients at once; the earlier key blocks (dQ) and the later query
    blocks (dK, dV) run unmasked. Every program walks L / B blocks in all: balanced work, and each gradient
    row is written once by its owner (no atomics, deterministic). Query rows >= L load as zeros: their P is
    a finite 1 and their dO and dS rows are zero, so they add nothing."""
    bh = tl.program_id(0)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    start = tl.program_id(1) * B
    rb = start + tl.arange(0, B)
    rb_col = rb[:, None]
    rd = tl.arange(0, D)[None, :]
    mask = rb_col < L
    d_ok = rd < HEAD_DIM
    if HEAD_DIM < D:
        mask = mask & d_ok
    base = b * s_b + h * s_h
    offs = base + rb_col.to(tl.int64) * s_row + rd  # the block's rows of q, k, v, dq, dk, dv
    o_offs = (b * o_b + h * o_h) + rb_col.to(tl.int64) * o_row + rd  # ... of o and dO
    q = tl.load(q_ptr + offs, mask=mask, other=0.0)
    do = tl.load(do_ptr + o_offs, mask=mask, other=0.0)
    delta = tl.sum(tl.load(o_ptr + o_offs, mask=mask, other=0.0) * do, axis=1)
    lse = tl.load(lse_ptr + bh * L + rb, mask=rb < L, other=0.0)
    q_scaled = q * qk_scale
    # earlier keys (dQ): every one visible to every query of the block
    dq = tl.full([B, D], 0.0, tl.float32)
    rn = tl.arange(0, B)
    kv_offs = base + rn.to(tl.int64)[:, None] * s_row + rd
    k_ptrs = k_ptr + kv_offs
    v_ptrs = v_ptr + kv_offs
    step = B * s_row
    for _ in range(0, start, B):
        if HEAD_DIM < D:
            k_blk = tl.load(k_ptrs, mask=d_ok, other=0.0)
            v_blk = tl.load(v_ptrs, mask=d_ok, other=0.0)
        else:
            k_blk = tl.load(k_ptrs)
            v_blk = tl.load(v_ptrs)
        p = tl.exp2(tl.dot(q_scaled, tl.trans(k_blk), input_precision="tf32x3") - lse[:, None])
        dp = tl.dot(do, tl.trans(v_blk), input_precision="tf32x3")
        dq = tl.dot(p * (dp - delta[:, None]), k_blk, dq, input_precision="tf32x3")
        k_ptrs += step
        v_ptrs += step
    # the diagonal block, for all three gradients: key > query hidden (key rows >= L too)
    k = tl.load(k_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    p = tl.exp2(tl.dot(q_scaled, tl.trans(k), input_precision="tf32x3") - lse[:, None])
    p = tl.where(rb[None, :] <= rb_col, p, 0.0)
    ds = p * (tl.dot(do, tl.trans(v), input_precision="tf32x3") - delta[:, None])
    dq = tl.dot(ds, k, dq, input_precision="tf32x3")
    tl.store(dq_ptr + offs, dq * sm_scale, mask=mask)
    dk = tl.dot(tl.trans(ds), q, input_precision="tf32x3")
    dv = tl.dot(tl.trans(p), do, input_precision="tf32x3")
    k_scaled = k * qk_scale
    # later queries (dK, dV): every one sees every key of the block; rows >= L load as zeros
    rm = rb + B
    q_ptrs = q_ptr + offs + step
    o_step = B * o_row
    do_ptrs = do_ptr + o_offs + o_step
    o_ptrs = o_ptr + o_offs + o_step
    lse_ptrs = lse_ptr + bh * L + rm
    for _ in range(start + B, L, B):
        q_mask = rm[:, None] < L
        if HEAD_DIM < D:
            q_mask = q_mask & d_ok
        q_blk = tl.load(q_ptrs, mask=q_mask, other=0.0)
        do_blk = tl.load(do_ptrs, mask=q_mask, other=0.0)
        delta_blk = tl.sum(tl.load(o_ptrs, mask=q_mask, other=0.0) * do_blk, axis=1)
        p_t = tl.exp2(tl.dot(k_scaled, tl.trans(q_blk), input_precision="tf32x3")
                      - tl.load(lse_ptrs, mask=rm < L, other=0.0)[None, :])
        dv = tl.dot(p_t, do_blk, dv, input_precision="tf32x3")
        dp_t = tl.dot(v, tl.trans(do_blk), input_precision="tf32x3")
        dk = tl.dot(p_t * (dp_t - delta_blk[None, :]), q_blk, dk, input_precision="tf32x3")
        rm += B
        q_ptrs += step
        do_ptrs += o_step
        o_ptrs += o_step
        lse_ptrs += B
    tl.store(dk_ptr + offs, dk * sm_scale, mask=mask)
    tl.store(dv_ptr + offs, dv, mask=mask)


# ------------------------------------------------------------------------------------------- the block
class AttentionBlock(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w_qkv, b_qkv, w_out, b_out, num_heads):
        bsz, seq, e = x.shape
        d = e // num_heads
        x2 = x.reshape(bsz * seq, e).contiguous()
        qkv = matmul(x2, w_qkv.t(), b_qkv)  # (tokens, 3e): q | k | v, head h at columns h d of each
        att = torch.empty((bsz * seq, e), device=x.device, dtype=torch.float32)
        lse = torch.empty((bsz * num_heads, seq), device=x.device, dtype=torch.float32)
        qk_scale = math.log2(math.e) / math.sqrt(d)  # softmax(s / sqrt(d)) = 2^(s qk_scale - max) / sum
        attention_forward_kernel[(bsz * num_heads, triton.cdiv(seq, FWD_BM))](
            qkv, qkv[:, e:], qkv[:, 2 * e:], att, lse, num_heads, seq, seq * 3 * e, d, 3 * e, seq * e, d, e,
            qk_scale, BM=FWD_BM, BN=FWD_BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d,
            num_warps=FWD_WARPS, num_stages=FWD_STAGES,
        )
        y = matmul(att, w_out.t(), b_out)
        ctx.save_for_backward(x2, w_qkv, w_out, qkv, att, lse)
        ctx.num_heads = num_heads
        return y.view(bsz, seq, e)

    @staticmethod
    def backward(ctx, dy):
        x2, w_qkv, w_out, qkv, att, lse = ctx.saved_tensors
        h = ctx.num_heads
        tokens, e = x2.shape
        seq = lse.shape[1]
        bsz = tokens // seq
        d = e // h
        dy = dy.reshape(tokens, e).contiguous()
        # output projection: d_att = dy W_out, dW_out = dy^T att, db_out = column sums of dy
        d_att = matmul(dy, w_out)
        db_out = torch.empty(e, device=dy.device, dtype=torch.float32)
        dw_out = matmul(dy.t(), att, rowsum=db_out)
        # attention: one kernel writes dq, dk and dv straight into dqkv, in the projection's layout
        dpad = max(16, triton.next_power_of_2(d))
        qkv_strides = (seq * 3 * e, d, 3 * e)
        o_strides = (seq * e, d, e)
        dqkv = torch.empty_like(qkv)
        attention_backward_kernel[(bsz * h, triton.cdiv(seq, BWD_B))](
            qkv, qkv[:, e:], qkv[:, 2 * e:], att, d_att, lse, dqkv, dqkv[:, e:], dqkv[:, 2 * e:], h, seq,
            *qkv_strides, *o_strides, math.log2(math.e) / math.sqrt(d), 1.0 / math.sqrt(d),
            B=BWD_B, D=dpad, HEAD_DIM=d, num_warps=BWD_WARPS, num_stages=BWD_STAGES,
        )
        # qkv projection: dx = dqkv W_qkv, dW_qkv = dqkv^T x, db_qkv = column sums of dqkv
        dx = matmul(dqkv, w_qkv)
        db_qkv = torch.empty(3 * e, device=dy.device, dtype=torch.float32)
        dw_qkv = matmul(dqkv.t(), x2, rowsum=db_qkv)
        return dx.view(bsz, seq, e), dw_qkv, db_qkv, dw_out, db_out, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.num_heads = num_heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return AttentionBlock.apply(
            x, self.qkv.weight.contiguous(), self.qkv.bias, self.out.weight.contiguous(), self.out.bias,
            self.num_heads,
        )
