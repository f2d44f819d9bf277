"""a.T @ b + bias, ReLU, mean over rows: the product never reaches memory. One Triton GEMM on split-precision
tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy) reads a's transpose in place through
strides, and its epilogue adds the bias, applies ReLU and sums each tile's valid rows per column; a tiny
second kernel adds a column's row-block partial sums and divides by m (eager: a 4096 x 4096 product
written, add and relu each read and write it, mean reads it).

Full preset: 4096^3, 137 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200, 3xTF32 by
~165 TFLOP/s of fp32-accurate tensor-core work; ~6 x 64 MB of traffic become 32 x 4096 partial sums.
Max abs error on the small preset: 1.4e-06 under the interpreter, whose tl.dot is plain fp32 (an fp64
emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own 1.3e-06).
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
def gemm_relu_colsum_kernel(
    a_ptr, b_ptr, bias_ptr, part_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # A = a.T: element (m, k) at k * M + m; B^T = b (K x N): element (n, k) at k * N + n
    acc = gemm_tile(a_ptr, b_ptr, pid_m, pid_n, M, N, K, 1, M, 1, N, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    v = tl.maximum(acc + tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :], 0.0)
    col = tl.sum(tl.where((rm < M)[:, None], v, 0.0), axis=0)
    tl.store(part_ptr + pid_m.to(tl.int64) * N + rn, col, mask=rn < N)


@triton.jit
def col_mean_kernel(part_ptr, out_ptr, T, N, inv_m, BT: tl.constexpr, BN: tl.constexpr):
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    acc = tl.zeros([BN], dtype=tl.float32)
    for t0 in range(0, T, BT):
        t = t0 + tl.arange(0, BT)
        v = tl.load(part_ptr + t.to(tl.int64)[:, None] * N + cols[None, :], mask=(t < T)[:, None] & (cols < N)[None, :], other=0.0)
        acc += tl.sum(v, axis=0)
    tl.store(out_ptr + cols, acc * inv_m, mask=cols < N)


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        k, m = a.shape
        n = b.shape[1]
        bm, bn, bk = 128, 128, 32
        tiles_m = triton.cdiv(m, bm)
        part = torch.empty((tiles_m, n), device=a.device, dtype=torch.float32)
        gemm_relu_colsum_kernel[(tiles_m * triton.cdiv(n, bn),)](
            a, b, self.bias, part, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        out = torch.empty(n, device=a.device, dtype=torch.float32)
        col_mean_kernel[(triton.cdiv(n, 128),)](part, out, tiles_m, n, 1.0 / m, BT=32, BN=128, num_warps=4)
        return out
