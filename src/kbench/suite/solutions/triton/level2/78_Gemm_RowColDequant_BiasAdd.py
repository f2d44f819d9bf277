"""Integer-valued GEMM + per-row and per-column dequantization + bias on int8 tensor cores, exactly.

The problem's operands are integers in [-127, 127] stored as fp32 (its docstring: every dot product is an
integer below 2**24, so fp32 computes it exactly in any order). They are therefore exactly int8: one
elementwise Triton kernel packs x_q and weight_q to int8 (4 bytes -> 1 per value), and the GEMM runs as
int8 x int8 -> int32 `tl.dot` (exact integer accumulation) with the dequantization fused into its epilogue:
float(acc) * x_scale[row] * weight_scale[col] + bias[col], in the reference's order, so the result is the
reference's bit for bit (eager: an fp32 GEMM, then three elementwise passes over the output).

Full preset: 4096 x 4096 x 4096, 137 GOP. fp32 cuBLAS is bound by the ~67 TFLOP/s SIMT peak of an H200;
int8 tensor cores offer ~1980 TOP/s dense. Packing reads 2 x 64 MB and writes 2 x 16 MB once per call
(~40 us at 4.3 TB/s); the output is written once instead of four times.
Max abs error on the small preset (interpreter): 0; int8 products and int32 sums are exact on the GPU too.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def pack_int8_kernel(src_ptr, dst_ptr, total, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask).to(tl.int8), mask=mask)


@triton.jit
def int8_gemm_dequant_bias_kernel(
    a_ptr, b_ptr, xs_ptr, ws_ptr, bias_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    per_group = GROUP_M * tl.cdiv(N, BN)  # GROUP_M row blocks share each band of weight tiles in L2
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    pb = b_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.int32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pb)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0)
            b = tl.load(pb, mask=rk[:, None] < K - k0, other=0)
        acc = tl.dot(a, b, acc, out_dtype=tl.int32)  # Triton 3.6 requires out_dtype to match acc
        pa += BK
        pb += BK
    mmask = rm < M
    nmask = rn < N
    xs = tl.load(xs_ptr + rm, mask=mmask, other=0.0)
    ws = tl.load(ws_ptr + rn, mask=nmask, other=0.0)
    bias = tl.load(bias_ptr + rn, mask=nmask, other=0.0)
    y = acc.to(tl.float32) * xs[:, None] * ws[None, :] + bias[None, :]
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=mmask[:, None] & nmask[None, :])


def pack_int8(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    out = torch.empty(t.shape, device=t.device, dtype=torch.int8)
    pack_int8_kernel[(triton.cdiv(t.numel(), 4096),)](t, out, t.numel(), BLOCK=4096, num_warps=8)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight_q = nn.Parameter(torch.randint(-127, 128, (out_features, in_features)).float())
        self.weight_scale = nn.Parameter(torch.rand(out_features) * 0.01 + 0.001)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x_q: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        a = pack_int8(x_q)
        b = pack_int8(self.weight_q)
        m, k = a.shape
        n = b.shape[0]
        out = torch.empty((m, n), device=x_q.device, dtype=torch.float32)
        bm, bn, bk = 128, 128, 128
        int8_gemm_dequant_bias_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
            a, b, x_scale.contiguous(), self.weight_scale, self.bias, out, m, n, k,
            BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, num_warps=8, num_stages=4,
        )
        return out
