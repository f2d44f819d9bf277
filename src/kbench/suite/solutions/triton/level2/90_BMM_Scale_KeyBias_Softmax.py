"""Batched matmul + scale + per-key bias + softmax: a batched Triton GEMM on split-precision tensor cores
(3xTF32, `input_precision="tf32x3"`, fp32-level accuracy; program axis 1 is the batch) whose epilogue
applies the scale and adds the key bias, then one row kernel that holds each 1024-wide row in registers
for its max and sum and writes the probabilities in place (eager: bmm, mul, add, softmax: the 128 MB
score tensor is written and read ~4 times after the GEMM).

Why the transposed tile: for fp32 wgmma the shared-memory operand must be K-contiguous, and Triton feeds it
through registers (hi/lo split) -- cheap (stmatrix) when the global tile is K-contiguous, but b is N-contiguous
(b[k, n]), which made the previous design transpose every b tile through scalar shared stores. So each program
computes the transposed score tile s^T[n, m] = sum_k b[k, n] a[m, k]: b's tile is the register operand (any
order works there), a's tile [BK, BM] is K-contiguous and takes the same path as the weight in 1_Gemm_ReLU;
the epilogue transposes the finished tile once so the store is row-major and coalesced.
The softmax needs whole rows (wider than a GEMM tile), so the scores make one read + write after the GEMM
(2 x 128 MB, ~60 us at 4.3 TB/s, against ~0.9 ms of GEMM).
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.5e-8."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 32768  # longest row held in registers (64 floats a thread at 16 warps)
LOOP_BLOCK = 4096  # chunk of the online-softmax path for longer rows
BM, BN, BK = 128, 128, 32  # 8 warps, 3 stages: 0 spills at 255 registers (BK = 64 spills)


@triton.jit
def tile_ids(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_N: tl.constexpr):
    """(row block, column block) of this program; GROUP_N column blocks share each band of a tiles in L2."""
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BN)
    per_group = GROUP_N * tl.cdiv(M, BM)
    first_n = (pid // per_group) * GROUP_N
    size_n = min(num_n - first_n, GROUP_N)
    return (pid % per_group) // size_n, first_n + (pid % per_group) % size_n


@triton.jit
def bmm_t_tile(a_ptr, b_ptr, rows, cols, M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 [BN, BM] tile of (a @ b)^T for in-bounds `rows` of a [M, K] and `cols` of b [K, N] (both row-major),
    on 3xTF32 tensor cores: b^T [BN, BK] is the register operand, a^T [BK, BM] the K-contiguous shared one."""
    rk = tl.arange(0, BK)
    pb = b_ptr + rk.to(tl.int64)[None, :] * N + cols[:, None]
    pa = a_ptr + rows.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            bt = tl.load(pb)
            at = tl.load(pa)
        else:
            bt = tl.load(pb, mask=rk[None, :] < K - k0, other=0.0)
            at = tl.load(pa, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(bt, at, acc, input_precision="tf32x3")
        pb += BK * N
        pa += BK
    return acc


@triton.jit
def bmm_scale_bias_kernel(
    a_ptr, b_ptr, kb_ptr, out_ptr, M, N, K, scale,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_N: tl.constexpr, EVEN_K: tl.constexpr,
):
    """scores[z] = a[z] @ b[z] * scale + key_bias[z] for batch z = program axis 1; all tensors contiguous."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_N)
    z = tl.program_id(1).to(tl.int64)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    # rows/columns past the edge compute on row/column 0 (in bounds, no masks in the K loop); stores drop them
    acc = bmm_t_tile(a_ptr + z * M * K, b_ptr + z * K * N, rm % M, rn % N, M, N, K, BM, BN, BK, EVEN_K)
    v = tl.trans(acc) * scale + tl.load(kb_ptr + z * N + rn, mask=rn < N, other=0.0)[None, :]
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
        bmm_scale_bias_kernel[(triton.cdiv(m, BM) * triton.cdiv(n, BN), z)](
            a, b, key_bias, out, m, n, k, float(self.scale),
            BM=BM, BN=BN, BK=BK, GROUP_N=8, EVEN_K=k % BK == 0, num_warps=8, num_stages=3,
        )
        softmax_kernel[(z * m,)](out, n, **row_launch(n))
        return out
