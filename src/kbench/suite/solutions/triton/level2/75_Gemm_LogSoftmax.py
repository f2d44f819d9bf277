"""Linear + log-softmax as a Triton GEMM whose epilogue starts the reduction, and one row pass:
1. GEMM: each [128 x 128] tile adds the bias, writes y, and stores per row the tile's max and sum exp(y - max)
   (a partial logsumexp, 64 tiles per row at the full size);
2. one program per row merges its partials (fixed order) into the logsumexp and writes y - lse in place.
The 134 MB logits (full size) are written once, read once and written once; eager runs addmm and then
log_softmax's max, sum and subtract passes over them.

The GEMM (137 GFLOP at the full size) runs on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-3 tolerance -- where cuBLAS with
TF32 off runs on the fp32 SIMT units (~75 % of their peak, the ceiling the eager and compiled references
share). Programs are grouped 8 row-tiles at a time so neighbouring programs reuse weight tiles from L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
9.5e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def linear_partial_lse_kernel(x_ptr, w_ptr, b_ptr, y_ptr, pm_ptr, ps_ptr, M, N, K,
                              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    # y = x @ W^T + b: x [M, K] and W [N, K] are both K-contiguous, the layout tensor cores read directly
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    grid_n = tl.cdiv(N, BN)
    group = pid // (GROUP_M * grid_n)
    first_m = group * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * grid_n)) % size_m
    pid_n = (pid % (GROUP_M * grid_n)) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    mmask = rm < M
    nmask = rn < N
    acc = tl.zeros([BM, BN], dtype=tl.float32)
    for k0 in range(0, K, BK):
        kk = k0 + rk
        kmask = kk < K
        a = tl.load(x_ptr + rm.to(tl.int64)[:, None] * K + kk[None, :], mask=mmask[:, None] & kmask[None, :], other=0.0)
        b = tl.load(w_ptr + rn.to(tl.int64)[None, :] * K + kk[:, None], mask=kmask[:, None] & nmask[None, :], other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
    y = acc + tl.load(b_ptr + rn, mask=nmask, other=0.0)[None, :]
    tl.store(y_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=mmask[:, None] & nmask[None, :])
    y = tl.where(nmask[None, :], y, float("-inf"))
    mx = tl.max(y, axis=1)
    s = tl.sum(tl.exp(y - mx[:, None]), axis=1)
    tl.store(pm_ptr + rm * grid_n + pid_n, mx, mask=mmask)
    tl.store(ps_ptr + rm * grid_n + pid_n, s, mask=mmask)


@triton.jit
def subtract_lse_kernel(y_ptr, pm_ptr, ps_ptr, N, tiles, BT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    t = tl.arange(0, BT)
    tmask = t < tiles
    pm = tl.load(pm_ptr + row * tiles + t, mask=tmask, other=float("-inf"))
    ps = tl.load(ps_ptr + row * tiles + t, mask=tmask, other=0.0)
    mx = tl.max(pm, axis=0)
    lse = mx + tl.log(tl.sum(tl.where(tmask, ps * tl.exp(pm - mx), 0.0), axis=0))
    base = y_ptr + row.to(tl.int64) * N
    for start in range(0, N, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < N
        tl.store(base + cols, tl.load(base + cols, mask=mask) - lse, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, k = x.shape
        n = self.linear.out_features
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        bm, bn, bk = 128, 128, 32
        tiles = triton.cdiv(n, bn)
        pm = torch.empty((m, tiles), device=x.device, dtype=torch.float32)
        ps = torch.empty_like(pm)
        linear_partial_lse_kernel[(triton.cdiv(m, bm) * tiles,)](
            x, self.linear.weight, self.linear.bias, y, pm, ps, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=8, num_stages=3,
        )
        subtract_lse_kernel[(m,)](y, pm, ps, n, tiles, BT=triton.next_power_of_2(tiles),
                                  BLOCK=min(4096, triton.next_power_of_2(n)))
        return y
