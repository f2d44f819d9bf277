"""Linear + sigmoid + cumulative sum over features: a Triton GEMM on split-precision tensor cores (3xTF32,
`input_precision="tf32x3"`, fp32-level accuracy) whose epilogue adds the bias, applies the sigmoid, scans
each (row, 128-feature) tile with `tl.cumsum` and writes the tile-local prefix sums plus each tile's total;
a second, fully parallel kernel adds to every tile the sum of the totals of the tiles left of it (eager:
addmm, sigmoid and cumsum: three passes over the output after the GEMM, the scan row-serial).

Full preset: 4096^3, 137 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200, 3xTF32 by
~165 TFLOP/s of fp32-accurate tensor-core work. A scan needs everything left of it, wider than a GEMM tile,
so the output makes one read + write after the GEMM (2 x 64 MB, ~30 us at 4.3 TB/s); the first tile of
each row needs no fix-up and is skipped. Max abs error on the small preset: 1.9e-05 under the interpreter,
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
def gemm_sigmoid_tile_scan_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, tot_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    acc = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < N
    s = tl.where(nmask[None, :], tl.sigmoid(acc + tl.load(b_ptr + rn, mask=nmask, other=0.0)[None, :]), 0.0)
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], tl.cumsum(s, axis=1),
             mask=(rm < M)[:, None] & nmask[None, :])
    tl.store(tot_ptr + rm.to(tl.int64) * tl.cdiv(N, BN) + pid_n, tl.sum(s, axis=1), mask=rm < M)


@triton.jit
def add_tile_prefix_kernel(out_ptr, tot_ptr, M, N, T, BR: tl.constexpr, BN: tl.constexpr, BT: tl.constexpr):
    tile = tl.program_id(1) + 1  # tile 0 has nothing to its left
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    t = tl.arange(0, BT)
    tot = tl.load(tot_ptr + r.to(tl.int64)[:, None] * T + t[None, :], mask=(r < M)[:, None] & (t < tile)[None, :], other=0.0)
    left = tl.sum(tot, axis=1)
    cols = tile * BN + tl.arange(0, BN)
    mask = (r < M)[:, None] & (cols < N)[None, :]
    offs = r.to(tl.int64)[:, None] * N + cols[None, :]
    tl.store(out_ptr + offs, tl.load(out_ptr + offs, mask=mask, other=0.0) + left[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        bm, bn, bk = 128, 128, 32
        tiles = triton.cdiv(n, bn)
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        tot = torch.empty((m, tiles), device=x.device, dtype=torch.float32)
        gemm_sigmoid_tile_scan_kernel[(triton.cdiv(m, bm) * tiles,)](
            x, w, self.linear.bias, out, tot, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        if tiles > 1:
            br = 16
            add_tile_prefix_kernel[(triton.cdiv(m, br), tiles - 1)](
                out, tot, m, n, tiles, BR=br, BN=bn, BT=triton.next_power_of_2(tiles), num_warps=4
            )
        return out
