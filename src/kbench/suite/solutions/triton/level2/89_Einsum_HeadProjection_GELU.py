"""Per-head projection einsum('bshd,hde->bshe') + exact GELU as one batched Triton GEMM on split-precision
tensor cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy). The einsum keeps the head axis in its
output, so it is H independent GEMMs [B*S, D] x [D, E] (K = head_dim); program axis 1 is the head. x is read
in place through strides (head h's rows are the B*S rows of stride H*D, K-contiguous), GELU is applied in the
epilogue and the result is written straight into the (b, s, h, e) output (eager: einsum copies x into a
contiguous (h, b*s, d) layout, runs a bmm, permutes the result back, then gelu: ~4 extra passes over 128 MB).

Why the weight permute: for fp32 wgmma the shared-memory operand must be K-contiguous, and Triton feeds it
through registers (hi/lo split) -- cheap (stmatrix) only when the global tile is K-contiguous. weight[h] is
D x E with E contiguous, so the previous design transposed every weight tile through scalar shared stores; the
8 MB weight is now permuted once per call to [H, E, D] and both operands take 1_Gemm_ReLU's layout.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.8e-7."""

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
def gemm_tile(x_ptr, w_ptr, rows, cols, K, s_xm,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 [BM, BN] tile of x @ W^T on 3xTF32 tensor cores, for in-bounds `rows` of x (row stride s_xm,
    K-contiguous) and `cols` of W [N, K] (row-major): both operands are K-contiguous."""
    rk = tl.arange(0, BK)
    px = x_ptr + rows.to(tl.int64)[:, None] * s_xm + rk[None, :]
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
def head_gemm_gelu_kernel(
    x_ptr, wt_ptr, out_ptr, M, N, K, H,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out[r, h, :] = gelu(x[r, h, :] @ weight[h]) for rows r = b*S + s; wt is weight permuted to [H, E, D]."""
    h = tl.program_id(1)
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    # rows/columns past the edge compute on row/column 0 (in bounds, no masks in the K loop); stores drop them
    acc = gemm_tile(x_ptr + h * K, wt_ptr + h.to(tl.int64) * N * K, rm % M, rn % N, K, H * K, BM, BN, BK, EVEN_K)
    y = 0.5 * acc * (1.0 + tl.erf(acc * 0.7071067811865476))
    offs = rm.to(tl.int64)[:, None] * (H * N) + h * N + rn[None, :]
    tl.store(out_ptr + offs, y, mask=(rm < M)[:, None] & (rn < N)[None, :])


class ModelNew(nn.Module):
    def __init__(self, num_heads: int, head_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_heads, head_dim, out_dim) / head_dim**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        wt = self.weight.transpose(1, 2).contiguous()  # [H, E, D]: K-contiguous B tiles
        b, s, h, d = x.shape
        e = wt.shape[1]
        m = b * s
        out = torch.empty((b, s, h, e), device=x.device, dtype=torch.float32)
        head_gemm_gelu_kernel[(triton.cdiv(m, BM) * triton.cdiv(e, BN), h)](
            x, wt, out, m, e, d, h,
            BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=d % BK == 0, num_warps=8, num_stages=3,
        )
        return out
