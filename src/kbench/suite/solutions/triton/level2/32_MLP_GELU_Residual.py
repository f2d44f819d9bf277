"""GELU MLP with residual, x + fc2(gelu(fc1(x))), in two Triton GEMMs with the chain in their epilogues:
fc1's tiles get the bias and the exact (erf) GELU, so the hidden state is written once, activated; fc2's
tiles get the bias and the residual x, so the output is written once (eager: addmm, gelu reads and writes
the 2048 x 8192 hidden state, 64 MB, again, addmm, add).

Full preset: 2048 tokens, 2048 -> 8192 -> 2048: 2 x 69 GFLOP. Both GEMMs run on tensor cores as 3xTF32
(input_precision="tf32x3": each fp32 operand is split into a TF32 high part and a TF32 residual and the three
significant cross products are accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-4
tolerance -- where cuBLAS with TF32 off runs on the fp32 SIMT units (~75 % of their ~67 TFLOP/s peak, the
ceiling the eager and compiled references share). Programs are grouped 8 row-tiles at a time so neighbouring
programs reuse the same weight tiles from L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
4.8e-7."""

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
def linear_kernel(
    x_ptr, w_ptr, b_ptr, r_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
    GELU: tl.constexpr, RESIDUAL: tl.constexpr,
):
    """out = gelu?(x @ w^T + b) (+ r); x: M x K, w: N x K, r and out: M x N, all row-major."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # out-of-range rows/columns read row 0 (in bounds) and are dropped by the store's mask
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    px = x_ptr + rm.to(tl.int64)[:, None] * K + rk[None, :]
    pw = w_ptr + rn.to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(px)
            w = tl.load(pw)
        else:
            a = tl.load(px, mask=rk[None, :] < K - k0, other=0.0)
            w = tl.load(pw, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, w, acc, input_precision="tf32x3")
        px += BK
        pw += BK
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if GELU:
        y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))  # exact (erf) GELU, gelu's default
    if RESIDUAL:
        y += tl.load(r_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, y, mask=mask)


def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, gelu: bool = False,
           residual: torch.Tensor | None = None) -> torch.Tensor:
    m, k = x.shape
    n = w.shape[0]
    out = torch.empty((m, n), device=x.device, dtype=torch.float32)
    bm, bn, bk = 128, 128, 32
    linear_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
        x, w, b, out if residual is None else residual, out, m, n, k,
        BM=bm, BN=bn, BK=bk, GROUP_M=8, EVEN_K=k % bk == 0, GELU=gelu, RESIDUAL=residual is not None,
        num_warps=8, num_stages=3,
    )
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        h = linear(x, self.fc1.weight.contiguous(), self.fc1.bias, gelu=True)
        return linear(h, self.fc2.weight.contiguous(), self.fc2.bias, residual=x)
