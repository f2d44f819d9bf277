"""a.T @ b + bias, ReLU, mean over rows: the product never reaches memory. One Triton GEMM on split-precision
tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy) whose epilogue adds the bias, applies
ReLU and sums each tile's valid rows per column; a tiny second kernel adds a column's row-block partial sums
and divides by m (eager: a 4096 x 4096 product written, add and relu each read and write it, mean reads it).

Why the layout: for fp32 wgmma the shared-memory (B) operand must be K-contiguous, and Triton feeds it through
registers (hi/lo split) -- cheap (stmatrix) only when the global tile is K-contiguous; the register (A) operand
takes any order. Here both a [K, M] and b [K, N] are K-strided, and the previous design read both in place, so
every b tile was transposed through scalar shared stores. Now a's tile [BM, BK] is read in place as the
register operand, and b is transposed once per call by a Triton tile kernel into bt [N, K] (64 MB read +
64 MB written, ~2 % of the 137 GFLOP GEMM at the full size), whose tiles then take 1_Gemm_ReLU's weight path.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
1.2e-6."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 128, 32  # 8 warps, 3 stages: 0 spills at 255 registers (BK = 64 spills)


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
def transpose_kernel(src_ptr, dst_ptr, R, C, BR: tl.constexpr, BC: tl.constexpr):
    """dst[C, R] = src[R, C]^T, one [BR, BC] tile a program (the layout change goes through shared memory)."""
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    mask = (r < R)[:, None] & (c < C)[None, :]
    v = tl.load(src_ptr + r.to(tl.int64)[:, None] * C + c[None, :], mask=mask)
    tl.store(dst_ptr + c.to(tl.int64)[:, None] * R + r[None, :], tl.trans(v), mask=tl.trans(mask))


@triton.jit
def gemm_tile(a_ptr, bt_ptr, rows, cols, M, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 [BM, BN] tile of a^T @ bt^T on 3xTF32 tensor cores, for in-bounds `rows` of a^T (a is [K, M],
    row-major: the register operand, M-contiguous) and `cols` of bt [N, K] (K-contiguous: the shared operand)."""
    rk = tl.arange(0, BK)
    pa = a_ptr + rk.to(tl.int64)[None, :] * M + rows[:, None]
    pb = bt_ptr + cols.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            at = tl.load(pa)
            b = tl.load(pb)
        else:
            at = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pb, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(at, b, acc, input_precision="tf32x3")
        pa += BK * M
        pb += BK
    return acc


@triton.jit
def gemm_relu_colsum_kernel(
    a_ptr, bt_ptr, bias_ptr, part_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """part[pid_m, n] = sum over this tile's valid rows of relu((a^T b)[m, n] + bias[n])."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    # rows/columns past the edge compute on row/column 0 (in bounds, no masks in the K loop); masked below
    acc = gemm_tile(a_ptr, bt_ptr, rm % M, rn % N, M, K, BM, BN, BK, EVEN_K)
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
        bt = torch.empty((n, k), device=b.device, dtype=torch.float32)
        transpose_kernel[(triton.cdiv(k, 64), triton.cdiv(n, 64))](b, bt, k, n, BR=64, BC=64, num_warps=4)
        tiles_m = triton.cdiv(m, BM)
        part = torch.empty((tiles_m, n), device=a.device, dtype=torch.float32)
        gemm_relu_colsum_kernel[(tiles_m * triton.cdiv(n, BN),)](
            a, bt, self.bias, part, m, n, k,
            BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=k % BK == 0, num_warps=8, num_stages=3,
        )
        out = torch.empty(n, device=a.device, dtype=torch.float32)
        col_mean_kernel[(triton.cdiv(n, 128),)](part, out, tiles_m, n, 1.0 / m, BT=32, BN=128, num_warps=4)
        return out
