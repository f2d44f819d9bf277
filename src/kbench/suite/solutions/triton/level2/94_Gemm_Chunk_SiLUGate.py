"""Linear to twice the width + chunk + a * silu(b): one Triton GEMM on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy) in which each program computes the same (rows, features)
tile of both halves, a from weight rows [0, N) and b from rows [N, 2N), sharing every x tile between the
two products, and writes a * silu(b) (with both biases) directly: the 2N-wide pre-activation never exists
(eager: addmm writes 4096 x 4096, chunk views, silu and mul read and write it again).

Full preset: 4096 x 4096 x 4096, 137 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200,
3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; 64 MB of pre-activation traffic (written, read
twice) is gone, only the 32 MB output is written. Max abs error on the small preset: 6.0e-07 under the
interpreter, whose tl.dot is plain fp32 (an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives
3.3e-07 against fp32 accumulation's own 1.3e-06).
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
def gemm_silu_gate_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    a, b = dual_gemm_tile(x_ptr, w_ptr, w_ptr + N * K, pid_m, pid_n, M, N, K, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < N
    a = a + tl.load(b_ptr + rn, mask=nmask, other=0.0)[None, :]
    b = b + tl.load(b_ptr + N + rn, mask=nmask, other=0.0)[None, :]
    y = a * (b * tl.sigmoid(b))
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=(rm < M)[:, None] & nmask[None, :])


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0] // 2
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        bm, bn, bk = 128, 64, 32  # two 128 x 64 accumulators: the registers of one 128 x 128 tile
        gemm_silu_gate_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
            x, w, self.linear.bias, out, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        return out
