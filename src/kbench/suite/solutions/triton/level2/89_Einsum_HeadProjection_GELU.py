"""Per-head projection einsum('bshd,hde->bshe') + GELU as one batched Triton GEMM on split-precision tensor
cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy): program axis 1 is the head, and each head's
operands are read in place through strides (x's rows for head h are B*S rows of stride H*D, the head's
weight is a D x E slice), the exact GELU is applied in the epilogue and the result is written straight
into the (b, s, h, e) output (eager: einsum permutes x into a contiguous (h, b*s, d) copy, runs a bmm,
permutes the result back, then gelu: ~4 extra passes over 128 MB tensors).

Full preset: 8 x 2048 tokens, 8 heads, 512 x 512 per head: 34 GFLOP. fp32 cuBLAS is bound by the
~67 TFLOP/s SIMT peak of an H200, 3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; x is read and
the output written once. Max abs error on the small preset: 9.5e-07 (tolerance 1e-4) under the interpreter,
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
def head_gemm_gelu_kernel(
    x_ptr, w_ptr, out_ptr, M, N, K, H,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    h = tl.program_id(1)
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # A: rows b*S + s of x[..., h, :] (stride H*K); B^T: weight[h] is K x N row-major, so B is N x K with
    # strides (1, N)
    acc = gemm_tile(x_ptr + h * K, w_ptr + h.to(tl.int64) * K * N, pid_m, pid_n, M, N, K,
                    H * K, 1, 1, N, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    y = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    offs = rm.to(tl.int64)[:, None] * (H * N) + h * N + rn[None, :]
    tl.store(out_ptr + offs, y, mask=(rm < M)[:, None] & (rn < N)[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_heads: int, head_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_heads, head_dim, out_dim) / head_dim**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.weight.contiguous()
        b, s, h, d = x.shape
        e = w.shape[2]
        m = b * s
        out = torch.empty((b, s, h, e), device=x.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 32
        head_gemm_gelu_kernel[(triton.cdiv(m, bm) * triton.cdiv(e, bn), h)](
            x, w, out, m, e, d, h,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=d % bk == 0, num_warps=8, num_stages=3,
        )
        return out
