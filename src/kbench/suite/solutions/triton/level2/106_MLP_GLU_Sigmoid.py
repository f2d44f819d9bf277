"""Sigmoid-GLU feed-forward, fc2(glu(fc1(x))), in two Triton GEMMs on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy). The first computes the same (tokens, hidden) tile of
both halves of fc1, a from weight rows [0, hidden) and b from rows [hidden, 2 hidden), sharing every x
tile, adds their biases and writes a * sigmoid(b) directly; the second is fc2 with its bias in the
epilogue (eager: addmm writes 2048 x 8192, glu reads it and writes half, addmm).

Full preset: 2048 tokens, 2048 -> 2 x 4096 -> 2048: 69 + 34 GFLOP. fp32 cuBLAS is bound by the
~67 TFLOP/s SIMT peak of an H200, 3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; 2 x 64 MB of
pre-activation traffic is gone. Max abs error on the small preset: 2.1e-07 under the interpreter, whose tl.dot
is plain fp32 (an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32
accumulation's own 1.3e-06).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


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
def dual_gemm_tile(a_ptr, b1_ptr, b2_ptr, pid_m, pid_n, M, N, K,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """Two fp32 (BM, BN) tiles, A @ B1^T and A @ B2^T (row-major A: M x K, B1, B2: N x K), sharing each A
    tile, on 3xTF32 tensor cores. Out-of-range rows/columns read row/column 0 and are masked on store."""
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a_ptr + rm.to(tl.int64)[:, None] * K + rk[None, :]
    wo = rn.to(tl.int64)[None, :] * K + rk[:, None]
    p1 = b1_ptr + wo
    p2 = b2_ptr + wo
    acc1 = tl.zeros((BM, BN), dtype=tl.float32)
    acc2 = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            w1 = tl.load(p1)
            w2 = tl.load(p2)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            w1 = tl.load(p1, mask=rk[:, None] < K - k0, other=0.0)
            w2 = tl.load(p2, mask=rk[:, None] < K - k0, other=0.0)
        acc1 = tl.dot(a, w1, acc1, input_precision="tf32x3")
        acc2 = tl.dot(a, w2, acc2, input_precision="tf32x3")
        pa += BK
        p1 += BK
        p2 += BK
    return acc1, acc2


@triton.jit
def gate(a, b):
    return a * tl.sigmoid(b)


@triton.jit
def gated_kernel(
    x_ptr, w1_ptr, w2_ptr, b1_ptr, b2_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    HAS_BIAS: tl.constexpr,
):
    """out = gate(x @ w1^T (+ b1), x @ w2^T (+ b2)): both products of one tile share each x tile."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    a, g = dual_gemm_tile(x_ptr, w1_ptr, w2_ptr, pid_m, pid_n, M, N, K, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    if HAS_BIAS:
        a += tl.load(b1_ptr + rn, mask=rn < N, other=0.0)[None, :]
        g += tl.load(b2_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], gate(a, g), mask=(rm < M)[:, None] & (rn < N)[None, :])


def gated(x, w1, w2, b1=None, b2=None):
    m, k = x.shape
    n = w1.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 64, 32  # two 128 x 64 accumulators: the registers of one 128 x 128 tile
    gated_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w1, w2, w1 if b1 is None else b1, w2 if b2 is None else b2, out, m, n, k,
        BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, HAS_BIAS=b1 is not None, num_warps=8, num_stages=3,
    )
    return out


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, RESIDUAL: tl.constexpr,
):
    """out = x @ w^T (+ b) (+ r): row-major M x N."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    y = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    if HAS_BIAS:
        y += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if RESIDUAL:
        y += tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def linear(x, w, b=None, residual=None):
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 128, 32
    linear_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w, w if b is None else b, out if residual is None else residual, out, m, n, k,
        BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0,
        HAS_BIAS=b is not None, RESIDUAL=residual is not None, num_warps=8, num_stages=3,
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.fc1.weight.contiguous()
        b = self.fc1.bias
        hidden = w.shape[0] // 2
        h = gated(x, w[:hidden], w[hidden:], b[:hidden], b[hidden:])
        return linear(h, self.fc2.weight.contiguous(), self.fc2.bias)
