"""Linear + tanh-approximate GELU, forward and backward, every FLOP in Triton.

All three GEMMs (forward x @ W^T, backward dx = dz @ W and dW = dz^T @ x) are one Triton GEMM kernel on
tensor cores as 3xTF32 (input_precision="tf32x3": each fp32 operand split into a TF32 high part and a TF32
residual, the three significant cross products accumulated in fp32), which keeps fp32-level accuracy where
cuBLAS with TF32 off runs on the fp32 SIMT units; the GEMMs are most of the step's work (three times
2 * tokens * in * out FLOPs against a few elementwise passes over [tokens, out]). The kernel computes
A @ B^T with both operands K-contiguous (the layout the tensor cores read from shared memory without a
transpose), in [128 x 128] tiles grouped 8 row-tiles at a time so neighbouring programs reuse the same B
tiles from L2.

Forward: the GEMM adds the bias in its epilogue and writes the pre-activation z (saved for the backward);
one elementwise kernel writes y = gelu_tanh(z). Writing y from the GEMM's epilogue too would save one read
of z, small beside the GEMM, but an epilogue holding z and y at once made the GEMM about twice as slow to
compile for sm_90 at 4 warps (kbench's compile check; measured on its CPU host), too slow for its budget.

Backward: one elementwise kernel reads dy and z once and computes dz = dy * gelu'(z), writing dz both as
[tokens, out] (the A operand of dx = dz @ W) and transposed (the A operand of dW = dz^T @ x), and the
per-tile column sums of dz that a small second kernel adds in a fixed order into db (deterministic; eager
runs gelu_backward, then a separate sum for db). A small transpose kernel gives W^T and x^T, so the two
backward GEMMs read both operands K-contiguous as well."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 128, 64  # GEMM tiles (8 warps, 3 stages of 64 KB)
# Elementwise and transpose tiles: on a GPU [32, 128] and [64, 64]; under the CPU interpreter, whose cost is a
# fixed overhead per op of each program, 8192 floats of whole rows (a small problem in a few programs).
EM_GPU, EN_GPU, TT_GPU, TILE_CPU = 32, 128, 64, 8192


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, R, C, TR: tl.constexpr, TC: tl.constexpr):
    """dst [C, R] = src [R, C]^T."""
    r = tl.program_id(0) * TR + tl.arange(0, TR)
    c = tl.program_id(1) * TC + tl.arange(0, TC)
    mask = (r < R)[:, None] & (c < C)[None, :]
    v = tl.load(src_ptr + r.to(tl.int64)[:, None] * C + c[None, :], mask=mask)
    tl.store(dst_ptr + c.to(tl.int64)[None, :] * R + r[:, None], v, mask=mask)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, n_parts, N, BP: tl.constexpr, BLOCK: tl.constexpr):
    """out [N] = the sum of the n_parts rows of part [n_parts, N] in a fixed order: BP rows at a time into a
    [BP, BLOCK] accumulator, whose rows are added at the end."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cmask = c < N
    acc = tl.zeros([BP, BLOCK], dtype=tl.float32)
    for p0 in range(0, n_parts, BP):
        p = p0 + tl.arange(0, BP)
        mask = (p < n_parts)[:, None] & cmask[None, :]
        acc += tl.load(part_ptr + p[:, None] * N + c[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0), mask=cmask)


def _tile2d(t, rows, cols, gpu_rows, gpu_cols):
    """A [rows, cols] tile: (gpu_rows, gpu_cols) on a GPU, else up to TILE_CPU floats of whole rows."""
    if t.is_cuda:
        return gpu_rows, gpu_cols
    tc = min(triton.next_power_of_2(cols), TILE_CPU)
    return max(1, min(TILE_CPU // tc, triton.next_power_of_2(rows))), tc


def _transpose(src):
    r, c = src.shape
    dst = torch.empty((c, r), device=src.device, dtype=src.dtype)
    tr, tc = _tile2d(src, r, c, TT_GPU, TT_GPU)
    transpose_kernel[(triton.cdiv(r, tr), triton.cdiv(c, tc))](src, dst, r, c, TR=tr, TC=tc, num_warps=4)
    return dst


def _column_sum(part, n):
    out = torch.empty((n,), device=part.device, dtype=torch.float32)
    column_sum_kernel[(triton.cdiv(n, 128),)](part, out, part.shape[0], n, BP=32, BLOCK=128)
    return out


@triton.jit
def linear_kernel(
    a_ptr, b_ptr, c_ptr, bias_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    """C [M, N] = A [M, K] @ B [N, K]^T (+ bias), both operands K-contiguous, on 3xTF32 tensor cores."""
    # GROUP_M row blocks share each band of B tiles in L2
    pid = tl.program_id(0)
    num_m = (M + BM - 1) // BM
    per_group = GROUP_M * ((N + BN - 1) // BN)
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # rows/columns past the edge compute on in-bounds rows/columns (no masks in the K loop); stores drop them
    pa = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    pb = b_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pb)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pb, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        pa += BK
        pb += BK
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(c_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], acc, mask=mask)


@triton.jit
def gelu_forward_kernel(z_ptr, y_ptr, M, N, EM: tl.constexpr, EN: tl.constexpr):
    """y = gelu_tanh(z), elementwise."""
    rm = tl.program_id(0) * EM + tl.arange(0, EM)
    rn = tl.program_id(1) * EN + tl.arange(0, EN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    # tanh(|u|) = (1 - e^(-2|u|)) / (1 + e^(-2|u|)): one exp, no overflow for large |u|
    u = (z + 0.044715 * z * z * z) * 0.7978845608028654
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    tl.store(y_ptr + offs, 0.5 * z * (1.0 + tl.where(u >= 0, t, -t)), mask=mask)


@triton.jit
def gelu_backward_kernel(dy_ptr, z_ptr, dz_ptr, dzt_ptr, part_ptr, M, N, EM: tl.constexpr, EN: tl.constexpr):
    """dz = dy * gelu_tanh'(z) into dz [M, N] and dz^T [N, M]; this tile's column sums of dz into its row
    of partials."""
    rm = tl.program_id(0) * EM + tl.arange(0, EM)
    rn = tl.program_id(1) * EN + tl.arange(0, EN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0)
    z = tl.load(z_ptr + offs, mask=mask, other=0.0)
    u = (z + 0.044715 * z * z * z) * 0.7978845608028654
    e = tl.exp(-2.0 * tl.abs(u))
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(u >= 0, t, -t)
    dz = dy * (0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * z * z))
    tl.store(dz_ptr + offs, dz, mask=mask)
    tl.store(dzt_ptr + rn.to(tl.int64)[None, :] * M + rm[:, None], dz, mask=mask)
    tl.store(part_ptr + tl.program_id(0) * N + rn, tl.sum(dz, axis=0), mask=rn < N)


def _linear(a, b, bias=None):
    """a [M, K] @ b [N, K]^T (+ bias), both contiguous."""
    m, k = a.shape
    n = b.shape[0]
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    linear_kernel[(triton.cdiv(m, BM) * triton.cdiv(n, BN),)](
        a, b, c, c if bias is None else bias, m, n, k,
        BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=k % BK == 0, HAS_BIAS=bias is not None, num_warps=8, num_stages=3,
    )
    return c


class LinearGELUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias):
        k = weight.shape[1]
        x2 = x.contiguous().view(-1, k)
        w = weight.contiguous()
        z = _linear(x2, w, bias)
        m, n = z.shape
        y = torch.empty_like(z)
        em, en = _tile2d(z, m, n, EM_GPU, EN_GPU)
        gelu_forward_kernel[(triton.cdiv(m, em), triton.cdiv(n, en))](z, y, m, n, EM=em, EN=en, num_warps=8)
        ctx.save_for_backward(x2, w, z)
        ctx.shape = x.shape
        return y.view(*x.shape[:-1], n)

    @staticmethod
    def backward(ctx, dy):
        x2, w, z = ctx.saved_tensors
        m, n = z.shape
        dy2 = dy.contiguous().view(m, n)
        dz = torch.empty_like(z)
        dzt = torch.empty((n, m), device=z.device, dtype=torch.float32)
        em, en = _tile2d(z, m, n, EM_GPU, EN_GPU)
        part = torch.empty((triton.cdiv(m, em), n), device=z.device, dtype=torch.float32)
        gelu_backward_kernel[(triton.cdiv(m, em), triton.cdiv(n, en))](
            dy2, z, dz, dzt, part, m, n, EM=em, EN=en, num_warps=8
        )
        db = _column_sum(part, n)
        dx = _linear(dz, _transpose(w))  # [M, N] @ (W^T [K, N])^T
        dw = _linear(dzt, _transpose(x2))  # [N, M] @ (x^T [K, M])^T
        return dx.view(ctx.shape), dw, db


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LinearGELUFunction.apply(x, self.linear.weight, self.linear.bias)
