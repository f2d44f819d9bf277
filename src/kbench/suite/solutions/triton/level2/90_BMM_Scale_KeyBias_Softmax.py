"""Batched matmul + scale + per-key bias + softmax: a batched Triton GEMM on split-precision tensor cores
(3xTF32, `input_precision="tf32x3"`, fp32-level accuracy; program axis 1 is the batch) whose epilogue
applies the scale and adds the key bias, then one row kernel that holds each 1024-wide row in registers
for its max and sum and writes the probabilities in place (eager: bmm, mul, add, softmax: the 128 MB
score tensor is written and read ~4 times after the GEMM).

Full preset: 32 x 1024^3, 69 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200, 3xTF32
by ~165 TFLOP/s of fp32-accurate tensor-core work. The softmax needs whole rows (wider than a GEMM tile),
so the scores make one read + write after the GEMM (2 x 128 MB, ~60 us at 4.3 TB/s).
Max abs error on the small preset: 4.5e-08 (tolerance 1e-4) under the interpreter, whose tl.dot is plain fp32
(an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own
1.3e-06).
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 32768  # longest row held in registers (64 floats a thread at 16 warps)
LOOP_BLOCK = 4096  # chunk of the online-softmax path for longer rows


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
def bmm_scale_bias_kernel(
    a_ptr, b_ptr, kb_ptr, out_ptr, M, N, K, scale,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    z = tl.program_id(1).to(tl.int64)
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # A = a[z] (M x K row-major); B^T = b[z] (K x N row-major): B element (n, k) at k * N + n
    acc = gemm_tile(a_ptr + z * M * K, b_ptr + z * K * N, pid_m, pid_n, M, N, K, K, 1, 1, N, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    v = acc * scale + tl.load(kb_ptr + z * N + rn, mask=rn < N, other=0.0)[None, :]
    offs = z * M * N + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, v, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def softmax_kernel(y_ptr, N, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr):
    row = y_ptr + tl.program_id(0).to(tl.int64) * N
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        v = tl.load(row + cols, mask=cols < N, other=float("-inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(row + cols, e / tl.sum(e, axis=0), mask=cols < N)
    else:  # online max and rescaled sum, then the write pass (re-reads come from L2)
        m = tl.full([BLOCK], float("-inf"), tl.float32)
        s = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(row + cols, mask=cols < N, other=float("-inf"))
            m_new = tl.maximum(m, v)
            s = s * tl.exp(tl.where(m_new == float("-inf"), 0.0, m - m_new)) + tl.where(cols < N, tl.exp(v - m_new), 0.0)
            m = m_new
        top = tl.max(m, axis=0)
        inv = 1.0 / tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - top)), axis=0)
        for start in range(0, N, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            v = tl.load(row + cols, mask=cols < N, other=0.0)
            tl.store(row + cols, tl.exp(v - top) * inv, mask=cols < N)


def row_launch(n: int) -> dict:
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": LOOP_BLOCK, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        key_bias = key_bias.contiguous()
        z, m, k = a.shape
        n = b.shape[2]
        out = torch.empty((z, m, n), device=a.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 32
        bmm_scale_bias_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn), z)](
            a, b, key_bias, out, m, n, k, float(self.scale),
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        softmax_kernel[(z * m,)](out, n, **row_launch(n))
        return out
