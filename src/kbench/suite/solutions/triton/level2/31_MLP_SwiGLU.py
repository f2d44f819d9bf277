"""SwiGLU MLP, down(silu(gate(x)) * up(x)), in two Triton GEMMs: the first computes the same (token,
hidden) tile of x @ W_gate^T and x @ W_up^T in two accumulators that share every x tile and writes
silu(g) * u from its epilogue; the second is the down projection. Neither pre-activation reaches memory,
only the gated hidden state, written once and read once (eager: two mm write 2 x 46 MB, silu and mul read
and write them again, mm).

Full preset: 2048 tokens, 2048 -> 2 x 5632 -> 2048: 94 + 47 GFLOP. Both GEMMs run on tensor cores as 3xTF32
(input_precision="tf32x3": each fp32 operand is split into a TF32 high part and a TF32 residual and the three
significant cross products are accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-4
tolerance -- where cuBLAS with TF32 off runs on the fp32 SIMT units (~75 % of their ~67 TFLOP/s peak, the
ceiling the eager and compiled references share). Programs are grouped 8 row-tiles at a time so neighbouring
programs reuse the same weight tiles from L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
2.1e-7."""

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
def swiglu_kernel(
    x_ptr, wg_ptr, wu_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = silu(x @ wg^T) * (x @ wu^T); x: M x K, wg, wu: N x K, all row-major; out: M x N."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    # out-of-range rows/columns read row 0 (in bounds) and are dropped by the store's mask
    rm = (pid_m * BM + tl.arange(0, BM)) % M
    rn = (pid_n * BN + tl.arange(0, BN)) % N
    rk = tl.arange(0, BK)
    px = x_ptr + rm.to(tl.int64)[:, None] * K + rk[None, :]
    w_offs = rn.to(tl.int64)[None, :] * K + rk[:, None]
    pg = wg_ptr + w_offs
    pu = wu_ptr + w_offs
    g = tl.zeros((BM, BN), dtype=tl.float32)
    u = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(px)
            wg = tl.load(pg)
            wu = tl.load(pu)
        else:
            a = tl.load(px, mask=rk[None, :] < K - k0, other=0.0)
            wg = tl.load(pg, mask=rk[:, None] < K - k0, other=0.0)
            wu = tl.load(pu, mask=rk[:, None] < K - k0, other=0.0)
        g = tl.dot(a, wg, g, input_precision="tf32x3")
        u = tl.dot(a, wu, u, input_precision="tf32x3")
        px += BK
        pg += BK
        pu += BK
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, g * tl.sigmoid(g) * u, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def linear_kernel(
    x_ptr, w_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out = x @ w^T; x: M x K, w: N x K, row-major; out: M x N."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
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
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    tl.store(out_ptr + offs, acc, mask=(rm < M)[:, None] & (rn < N)[None, :])


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, dim = x.shape
        w_gate, w_up, w_down = (lin.weight.contiguous() for lin in (self.gate, self.up, self.down))
        hidden = w_gate.shape[0]
        h = torch.empty((m, hidden), device=x.device, dtype=torch.float32)
        # two 128 x 64 accumulators hold as many registers as one 128 x 128 tile
        swiglu_kernel[(triton.cdiv(m, 128) * triton.cdiv(hidden, 64),)](
            x, w_gate, w_up, h, m, hidden, dim,
            BM=128, BN=64, BK=32, GROUP_M=8, EVEN_K=dim % 32 == 0, num_warps=8, num_stages=3,
        )
        out = torch.empty((m, dim), device=x.device, dtype=torch.float32)
        linear_kernel[(triton.cdiv(m, 128) * triton.cdiv(dim, 128),)](
            h, w_down, out, m, dim, hidden,
            BM=128, BN=128, BK=32, GROUP_M=8, EVEN_K=hidden % 32 == 0, num_warps=8, num_stages=3,
        )
        return out
