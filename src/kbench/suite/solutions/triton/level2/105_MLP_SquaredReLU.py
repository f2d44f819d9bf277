"""Squared-ReLU feed-forward, fc2(relu(fc1(x))^2): two Triton GEMMs on split-precision tensor cores
(3xTF32, `input_precision="tf32x3"`, fp32-level accuracy), fc1's bias and relu(.)^2 in the first one's
epilogue and fc2's bias in the second's, so the hidden state is written once and read once (eager: addmm,
relu, pow, addmm: two extra passes over the 2048 x 8192 hidden state).

Full preset: 2048 tokens, 2048 -> 8192 -> 2048: 2 x 69 GFLOP. fp32 cuBLAS is bound by the ~67 TFLOP/s
SIMT peak of an H200, 3xTF32 by ~165 TFLOP/s of fp32-accurate tensor-core work; 4 x 64 MB of activation
traffic is gone. Max abs error on the small preset: 3.9e-07 under the interpreter, whose tl.dot is plain fp32
(an fp64 emulation of 3xTF32's operand rounding at K = 4096 gives 3.3e-07 against fp32 accumulation's own
1.3e-06).
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
def activation(y):
    r = tl.maximum(y, 0.0)
    return r * r


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    HAS_BIAS: tl.constexpr, ACT: tl.constexpr, RESIDUAL: tl.constexpr,
):
    """out = act(x @ w^T (+ b)) (+ r): row-major M x N."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    y = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    if HAS_BIAS:
        y += tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if ACT:
        y = activation(y)
    if RESIDUAL:
        y += tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def linear(x, w, b=None, act=False, residual=None):
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 128, 32
    linear_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w, w if b is None else b, out if residual is None else residual, out, m, n, k,
        BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0,
        HAS_BIAS=b is not None, ACT=act, RESIDUAL=residual is not None, num_warps=8, num_stages=3,
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = linear(x.contiguous(), self.fc1.weight.contiguous(), self.fc1.bias, act=True)
        return linear(h, self.fc2.weight.contiguous(), self.fc2.bias)
