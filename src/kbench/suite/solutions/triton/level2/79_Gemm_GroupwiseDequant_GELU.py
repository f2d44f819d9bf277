"""Group-wise dequantized linear + bias + GELU in one Triton GEMM, on tensor cores at fp32 accuracy.

y[m, n] = sum_g scale[n, g] * sum_{k in g} x[m, k] * q[n, k]: the weight is never dequantized in memory.
The integer weights q (|q| <= 8) are exact in TF32, so only the activation needs splitting: x = x_hi + x_lo
with x_hi its top 11 significant bits (exact in TF32) and x_lo the rest, and each group's partial product
is x_hi @ q + x_lo @ q, two TF32 tensor-core products with fp32 accumulation whose only error is the
truncation of x_lo's last bits (~2^-22 relative), the accuracy of 3xTF32 at two thirds of its cost. The
group's partial is then scaled by scale[n, g] and accumulated in fp32; the epilogue adds the bias and
applies the exact (erf) GELU (eager: 2 elementwise passes over the 4096 x 4096 weight, an fp32 GEMM, GELU).

Full preset: 4096 x 4096 x 4096, 137 GFLOP: fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200,
two TF32 products by ~250 TFLOP/s of fp32-accurate work; the 64 MB dequantized weight is never written.
Group sizes that are not a multiple of 16 take a second kernel that dequantizes as the reference does
(q * scale, one fp32 rounding) and multiplies in 3xTF32.
Max abs error on the small preset: 4.8e-07 under the interpreter, whose tl.dot is plain fp32 (an fp64
emulation of the split against exact integer weights at K = 4096 gives 1.1e-07 relative, fp32's own 3.0e-07).
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
def gelu_store(acc, b_ptr, out_ptr, pid_m, pid_n, M, N, BM: tl.constexpr, BN: tl.constexpr):
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    v = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], v, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def groupwise_gemm_gelu_kernel(
    x_ptr, q_ptr, s_ptr, b_ptr, out_ptr, M, N, K, G, GS,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    pa = x_ptr + rm.to(tl.int64)[:, None] * K + rk[None, :]
    pb = q_ptr + rn.to(tl.int64)[None, :] * K + rk[:, None]
    ps = s_ptr + rn.to(tl.int64) * G
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    part = tl.zeros((BM, BN), dtype=tl.float32)  # the current group's partial product
    for k0 in range(0, K, BK):  # GS is a multiple of BK: a step never straddles two groups
        a = tl.load(pa)
        q = tl.load(pb)
        a_hi = (a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)  # top 11 bits
        part = tl.dot(a_hi, q, part, input_precision="tf32")  # exact products: q is a small integer
        part = tl.dot(a - a_hi, q, part, input_precision="tf32")
        if (k0 + BK) % GS == 0:  # the group is complete: scale it into the sum
            acc += part * tl.load(ps + k0 // GS)[None, :]
            part = tl.zeros((BM, BN), dtype=tl.float32)
        pa += BK
        pb += BK
    gelu_store(acc, b_ptr, out_ptr, pid_m, pid_n, M, N, BM, BN)


@triton.jit
def dequant_gemm_gelu_kernel(
    x_ptr, q_ptr, s_ptr, b_ptr, out_ptr, M, N, K, G, GS,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        kmask = k0 + rk < K
        a = tl.load(x_ptr + rm.to(tl.int64)[:, None] * K + (k0 + rk)[None, :], mask=kmask[None, :], other=0.0)
        q = tl.load(q_ptr + rn.to(tl.int64)[None, :] * K + (k0 + rk)[:, None], mask=kmask[:, None], other=0.0)
        s = tl.load(s_ptr + rn.to(tl.int64)[None, :] * G + ((k0 + rk) // GS)[:, None], mask=kmask[:, None], other=0.0)
        acc = tl.dot(a, q * s, acc, input_precision="tf32x3")
    gelu_store(acc, b_ptr, out_ptr, pid_m, pid_n, M, N, BM, BN)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, group_size: int):
        super().__init__()
        self.group_size = group_size
        self.weight_q = nn.Parameter(torch.randint(-8, 8, (out_features, in_features)).float())
        self.scales = nn.Parameter(torch.rand(out_features, in_features // group_size) * 0.01 + 0.005)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        q = self.weight_q.contiguous()
        s = self.scales.contiguous()
        m, k = x.shape
        n = q.shape[0]
        gs = self.group_size
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        bm, bn = 128, 128
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        if gs % 16 == 0:
            bk = 32 if gs % 32 == 0 else 16
            groupwise_gemm_gelu_kernel[grid](
                x, q, s, self.bias, out, m, n, k, k // gs, gs,
                BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=8, num_stages=3,
            )
        else:
            dequant_gemm_gelu_kernel[grid](
                x, q, s, self.bias, out, m, n, k, k // gs, gs,
                BM=bm, BN=bn, BK=32, GROUP_M=8, num_warps=8, num_stages=3,
            )
        return out
