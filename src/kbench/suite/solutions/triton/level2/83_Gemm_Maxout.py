"""Maxout: linear to out_features * pieces, then the max over each feature's pieces, in one Triton GEMM on
split-precision tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy). A program owns a
(rows, output features) tile and runs one K loop per piece p over weight rows j * pieces + p (a strided
view of the weight: no reshuffle), adding the piece's bias and keeping the running max, so only the
pieces-times-smaller output is written (eager: addmm writes 4096 x 4096, amax reads it back).

Full preset: 4096 x 4096 x 4096 (1024 features x 4 pieces), 137 GFLOP: fp32 cuBLAS is bound by the
~67 TFLOP/s SIMT peak of an H200, 3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; the 64 MB
pre-activation is never written or read. Max abs error on the small preset: 5.4e-07 under the interpreter,
whose tl.dot is plain fp32 (an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against
fp32 accumulation's own 1.3e-06).
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
def gemm_maxout_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K, P,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < N
    best = tl.full((BM, BN), float("-inf"), tl.float32)
    for p in range(0, P):  # piece p of feature j is weight row j * P + p
        acc = gemm_tile(x_ptr, w_ptr + p * K, pid_m, pid_n, M, N, K, K, 1, P * K, 1, BM, BN, BK, EVEN_K)
        bias = tl.load(b_ptr + rn * P + p, mask=nmask, other=0.0)
        best = tl.maximum(best, acc + bias[None, :])
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], best, mask=(rm < M)[:, None] & nmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, pieces: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features * pieces)
        self.pieces = pieces

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0] // self.pieces
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        bm, bn, bk = 128, 64, 32  # the running max and the piece's accumulator: one 128 x 128 tile's registers
        gemm_maxout_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
            x, w, self.linear.bias, out, m, n, k, self.pieces,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        return out
