"""Cosine-classifier head: linear + per-row L2 normalization + scale. A Triton GEMM on split-precision
tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy) with the bias in its epilogue, then
one row kernel that holds each row in registers for its norm and writes y / max(||y||, 1e-12) * scale in
place (eager: addmm, then normalize's norm, clamp, expand, div and the mul: several passes).

Full preset: 4096^3, 137 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200, 3xTF32 by
~165 TFLOP/s of fp32-accurate tensor-core work. The norm needs whole 4096-wide rows (wider than a GEMM
tile), so the output makes one read + write after the GEMM (2 x 64 MB, ~30 us at 4.3 TB/s).
Max abs error on the small preset: 1.9e-06 under the interpreter, whose tl.dot is plain fp32 (an fp64
emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own 1.3e-06).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 32768  # longest row held in registers (64 floats a thread at 16 warps)
LOOP_BLOCK = 4096  # chunk of the two-pass path for longer rows


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
def gemm_bias_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    acc = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def l2_normalize_scale_kernel(y_ptr, N, scale, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr):
    row = y_ptr + tl.program_id(0).to(tl.int64) * N
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        v = tl.load(row + cols, mask=mask, other=0.0)
        f = scale / tl.maximum(tl.sqrt(tl.sum(v * v, axis=0)), 1e-12)
        tl.store(row + cols, v * f, mask=mask)
    else:
        q = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(row + cols, mask=cols < N, other=0.0)
            q += v * v
        f = scale / tl.maximum(tl.sqrt(tl.sum(q, axis=0)), 1e-12)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            tl.store(row + cols, tl.load(row + cols, mask=cols < N, other=0.0) * f, mask=cols < N)


def row_launch(n: int) -> dict:
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": LOOP_BLOCK, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 32
        gemm_bias_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
            x, w, self.linear.bias, out, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        l2_normalize_scale_kernel[(m,)](out, n, float(self.scale), **row_launch(n))
        return out
