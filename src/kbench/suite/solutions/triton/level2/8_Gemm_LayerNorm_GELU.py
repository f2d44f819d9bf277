"""Linear + LayerNorm + exact (erf) GELU as a Triton GEMM whose epilogue starts the row statistics, and one
row pass:
1. GEMM: each [128 x 128] tile adds the bias, writes y, and stores per row the tile's mean and centered sum
   of squares M2 (exact within the tile: the tile is in registers; 32 partials per row at the full size);
2. one program per row merges its partials in a fixed order (Chan's parallel formula: mean = sum n_t mean_t
   / N, M2 = sum M2_t + n_t (mean_t - mean)^2, as accurate as a centered two-pass variance) and writes
   gelu((y - mean) * rstd * gamma + beta) in place.
The 34 MB GEMM output (full size) is written once, read once and written once; eager writes the addmm output,
then layer_norm and gelu each read a full-size tensor and write one.

The GEMM (69 GFLOP at the full size) runs on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-4 tolerance -- where cuBLAS with
TF32 off runs on the fp32 SIMT units (~75 % of their peak, the ceiling the eager and compiled references
share). Programs are grouped 8 row-tiles at a time so neighbouring programs reuse the same weight tiles from
L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
7.2e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 128, 64  # 8 warps, 3 stages of 64 KB: 92 TFLOP/s on an H200 (78 at BK = 32, 57 at 128 x 256)


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
def gemm_tile(x_ptr, w_ptr, rows, cols, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 [BM, BN] tile of x @ W^T on 3xTF32 tensor cores, for in-bounds indices `rows` of x [M, K] and
    `cols` of W [N, K]: both operands are K-contiguous, the layout tensor cores read directly."""
    rk = tl.arange(0, BK)
    px = x_ptr + rows.to(tl.int64)[:, None] * K + rk[None, :]
    pw = w_ptr + cols.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(px)
            b = tl.load(pw)
        else:
            a = tl.load(px, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pw, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        px += BK
        pw += BK
    return acc


@triton.jit
def linear_partial_stats_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, pmean_ptr, pm2_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    # rows/columns past the edge compute on row/column 0 (in bounds, no masks in the K loop); stores drop them
    acc = gemm_tile(x_ptr, w_ptr, rm % M, rn % N, K, BM, BN, BK, EVEN_K)
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    nmask = (rn < N)[None, :]
    tl.store(y_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=(rm < M)[:, None] & nmask)
    mean = tl.sum(tl.where(nmask, y, 0.0), axis=1) / tl.minimum(BN, N - pid_n * BN).to(tl.float32)
    d = tl.where(nmask, y - mean[:, None], 0.0)
    offs = rm.to(tl.int64) * tl.cdiv(N, BN) + pid_n
    tl.store(pmean_ptr + offs, mean, mask=rm < M)
    tl.store(pm2_ptr + offs, tl.sum(d * d, axis=1), mask=rm < M)


@triton.jit
def layernorm_gelu_kernel(y_ptr, pmean_ptr, pm2_ptr, g_ptr, b_ptr, N, T, eps,
                          BN: tl.constexpr, BT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    t = tl.arange(0, BT)
    tmask = t < T
    cnt = tl.where(tmask, tl.minimum(BN, N - t * BN), 0).to(tl.float32)  # columns behind each partial
    pmean = tl.load(pmean_ptr + row * T + t, mask=tmask, other=0.0)
    pm2 = tl.load(pm2_ptr + row * T + t, mask=tmask, other=0.0)
    mean = tl.sum(cnt * pmean, axis=0) / N
    dm = pmean - mean
    rstd = tl.rsqrt(tl.sum(pm2 + cnt * dm * dm, axis=0) / N + eps)
    base = y_ptr + row * N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        v = (tl.load(base + cols, mask=mask, other=0.0) - mean) * rstd
        v = v * tl.load(g_ptr + cols, mask=mask, other=0.0) + tl.load(b_ptr + cols, mask=mask, other=0.0)
        tl.store(base + cols, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.layer_norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        tiles = triton.cdiv(n, BN)
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        pmean = torch.empty((m, tiles), device=x.device, dtype=torch.float32)
        pm2 = torch.empty_like(pmean)
        linear_partial_stats_kernel[(triton.cdiv(m, BM) * tiles,)](
            x, w, self.linear.bias, y, pmean, pm2, m, n, k,
            BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=k % BK == 0, num_warps=8, num_stages=3,
        )
        ln = self.layer_norm
        block = min(4096, triton.next_power_of_2(n))
        layernorm_gelu_kernel[(m,)](
            y, pmean, pm2, ln.weight, ln.bias, n, tiles, float(ln.eps),
            BN=BN, BT=max(2, triton.next_power_of_2(tiles)), BLOCK=block, num_warps=max(1, min(8, block // 512)),
        )
        return y
