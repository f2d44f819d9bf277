"""Causal attention, forward and backward, as two flash-attention Triton kernels: the (seq x seq) scores and
probabilities are never written to memory in either pass (eager writes the 4 x 16 x 1024^2 scores, the
masked copy and the softmax, 256 MiB each, and its backward reads them and writes as many gradients).

Forward, one program per 128 queries of a (batch, head), the heavy (late) query blocks launched first: keys
and values stream in 64-row blocks, and the scores, an online softmax and P @ V stay on chip; the output and
each row's log-sum-exp (4 bytes a row) are written. Key blocks past the block's last query are never loaded
(the loop's bound); a compare inside the loop hides the rest of the future.
Backward (flash-attention 2), one kernel: program j owns 64 rows of a (batch, head) both as queries (dQ from
the keys at or before them) and as keys (dK and dV from the queries at or after them), so every program walks
the same number of blocks. P is recomputed from q, k and the saved log-sum-exp, dS = P (dO V^T - delta) with
delta = rowsum(dO * O) taken from tiles the step loads anyway. Only the diagonal block needs the causal
compare, and it serves all three gradients at once; the other blocks run unmasked. Each gradient row is
written once, by the program that owns it: no atomics, deterministic.
Every product runs on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32 operand split into a TF32
high part and a TF32 residual, the three significant cross products accumulated in fp32), which keeps
fp32-level accuracy where cuBLAS with TF32 off runs on the fp32 SIMT units. The softmax works in base 2:
log2(e) / sqrt(d) is folded into q (or k) once per tile, exact algebra with fp32 rounding only."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

FWD_BM, FWD_BN, FWD_WARPS, FWD_STAGES = 128, 64, 8, 2  # forward: query rows a program, key rows a step
BWD_B, BWD_WARPS, BWD_STAGES = 64, 8, 2  # backward: rows of the owned block and of each streamed block


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


class CausalAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        b, h, seq, d = q.shape
        o = torch.empty_like(q)
        lse = torch.empty((b * h, seq), device=q.device, dtype=torch.float32)
        strides = (h * seq * d, seq * d, d)  # (batch, head, row) of q, k, v and o alike
        qk_scale = math.log2(math.e) / math.sqrt(d)  # softmax(s / sqrt(d)) = 2^(s qk_scale - max) / sum
        attention_forward_kernel[(b * h, triton.cdiv(seq, FWD_BM))](
            q, k, v, o, lse, h, seq, *strides, *strides, qk_scale,
            BM=FWD_BM, BN=FWD_BN, D=max(16, triton.next_power_of_2(d)), HEAD_DIM=d,
            num_warps=FWD_WARPS, num_stages=FWD_STAGES,
        )
        ctx.save_for_backward(q, k, v, o, lse)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        do = do.contiguous()
        b, h, seq, d = q.shape
        strides = (h * seq * d, seq * d, d)
        dpad = max(16, triton.next_power_of_2(d))
        qk_scale = math.log2(math.e) / math.sqrt(d)
        sm_scale = 1.0 / math.sqrt(d)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        attention_backward_kernel[(b * h, triton.cdiv(seq, BWD_B))](
            q, k, v, o, do, lse, dq, dk, dv, h, seq, *strides, *strides, qk_scale, sm_scale,
            B=BWD_B, D=dpad, HEAD_DIM=d, num_warps=BWD_WARPS, num_stages=BWD_STAGES,
        )
        return dq, dk, dv


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return CausalAttention.apply(q, k, v)
