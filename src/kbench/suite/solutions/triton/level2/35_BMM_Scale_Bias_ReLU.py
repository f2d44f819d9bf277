"""Batched matmul + scale + bias + ReLU as one batched Triton GEMM with the chain in its epilogue: program
axis 1 is the batch, each [128 x 128] output tile gets relu(acc * scale + bias[n]) and is written once
(eager: bmm writes the 32 x 1024 x 1024 product, 128 MB, then mul, add and relu each read and write it).

The GEMM (32 x 1024^3: 69 GFLOP at the full size) runs on tensor cores as 3xTF32 (input_precision="tf32x3":
each fp32 operand is split into a TF32 high part and a TF32 residual and the three significant cross products
are accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-4 tolerance -- where cuBLAS
with TF32 off runs on the fp32 SIMT units (~75 % of their ~67 TFLOP/s peak, the ceiling the eager and
compiled references share). Operands are read through their strides (unit strides are specialized by Triton,
so contiguous inputs get vector loads and no copy is made); programs are grouped 8 row-tiles at a time so
neighbouring programs of one batch reuse the same b tiles from L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.8e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def tile_ids(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program; GROUP_M row blocks share each band of b tiles in L2."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % size_m, (pid % per_group) // size_m


@triton.jit
def bmm_scale_bias_relu_kernel(
    a_ptr, b_ptr, bias_ptr, out_ptr, M, N, K, scale,
    s_ab, s_am, s_ak, s_bb, s_bk, s_bn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out[i] = relu(a[i] @ b[i] * scale + bias) for batch i = program axis 1; out is contiguous (B, M, N)."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    batch = tl.program_id(1).to(tl.int64)
    # out-of-range rows/columns read row/column 0 (in bounds) and are dropped by the store's mask
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = a_ptr + batch * s_ab + rm.to(tl.int64)[:, None] * s_am + rk[None, :] * s_ak
    pb = b_ptr + batch * s_bb + rk[:, None] * s_bk + rn.to(tl.int64)[None, :] * s_bn
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
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    y = acc * scale + tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    offs = batch * M * N + rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, tl.maximum(y, 0.0), mask=(rm < M)[:, None] & (rn < N)[None, :])


class ModelNew(nn.Module):
    def __init__(self, n: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        batch, m, k = a.shape
        n = b.shape[2]
        out = torch.empty((batch, m, n), device=a.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 32
        bmm_scale_bias_relu_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn), batch)](
            a, b, self.bias, out, m, n, k, float(self.scale), *a.stride(), *b.stride(),
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=3,
        )
        return out
