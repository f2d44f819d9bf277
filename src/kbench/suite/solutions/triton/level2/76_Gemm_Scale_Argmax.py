"""Linear + per-class scale + argmax: the logits never reach memory. One Triton GEMM on split-precision tensor
cores (3xTF32: `tl.dot(..., input_precision="tf32x3")`, hi*hi + hi*lo + lo*hi, about fp32's accuracy) whose
epilogue adds the bias, multiplies by the scale and reduces each (row, 128-class tile) to its maximum and
first index; a tiny second kernel picks the first maximal tile per row (eager: addmm writes the logits, mul
writes them again, argmax reads them).

Full preset: 4096 x 8192 x 1000, 67 GFLOP. fp32 cuBLAS runs it on the SIMT pipes (~67 TFLOP/s peak on an
H200); 3xTF32 runs on the tensor cores (~495 TFLOP/s of dense TF32, so ~165 TFLOP/s of fp32-accurate
products), and the 16 MB logits round trips of eager are gone: 4096 x 8 (value, index) pairs are written.
Ties resolve to the lowest class index, as torch.argmax does.
Max abs error on the small preset: 0 under the interpreter, whose tl.dot is plain fp32 (an fp64 emulation of
3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own 1.3e-06).
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
def gemm_scale_tile_argmax_kernel(
    x_ptr, w_ptr, b_ptr, s_ptr, pval_ptr, pidx_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    acc = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    nmask = rn < N
    bias = tl.load(b_ptr + rn, mask=nmask, other=0.0)
    scale = tl.load(s_ptr + rn, mask=nmask, other=0.0)
    v = (acc + bias[None, :]) * scale[None, :]  # the reference's order: linear (with bias), then * scale
    v = tl.where(nmask[None, :], v, float("-inf"))
    best = tl.max(v, axis=1)
    idx = tl.argmax(v, axis=1, tie_break_left=True) + pid_n * BN
    out = rm.to(tl.int64) * tl.cdiv(N, BN) + pid_n
    tl.store(pval_ptr + out, best, mask=rm < M)
    tl.store(pidx_ptr + out, idx, mask=rm < M)


@triton.jit
def tile_argmax_kernel(pval_ptr, pidx_ptr, out_ptr, M, T, BR: tl.constexpr, BT: tl.constexpr):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    t = tl.arange(0, BT)
    mask = (r < M)[:, None] & (t < T)[None, :]
    offs = r.to(tl.int64)[:, None] * T + t[None, :]
    v = tl.load(pval_ptr + offs, mask=mask, other=float("-inf"))
    i = tl.load(pidx_ptr + offs, mask=mask, other=0)
    first = tl.argmax(v, axis=1, tie_break_left=True)  # tiles are in class order: first tile, first index
    pick = tl.sum(tl.where(t[None, :] == first[:, None], i, 0), axis=1)
    tl.store(out_ptr + r, pick.to(tl.int64), mask=r < M)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        bm, bn, bk = 128, 128, 32
        tiles = triton.cdiv(n, bn)
        pval = torch.empty((m, tiles), device=x.device, dtype=torch.float32)
        pidx = torch.empty((m, tiles), device=x.device, dtype=torch.int32)
        gemm_scale_tile_argmax_kernel[(triton.cdiv(m, bm) * tiles,)](
            x, w, self.linear.bias, self.scale, pval, pidx, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        out = torch.empty(m, device=x.device, dtype=torch.int64)
        tile_argmax_kernel[(triton.cdiv(m, 64),)](
            pval, pidx, out, m, tiles, BR=64, BT=max(2, triton.next_power_of_2(tiles)), num_warps=4
        )
        return out
