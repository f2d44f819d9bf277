"""Linear + GroupNorm + SiLU + per-feature multiplier + SiLU in one Triton GEMM on split-precision tensor
cores (3xTF32, `input_precision="tf32x3"`, fp32-level accuracy). A GroupNorm group of a row is 256
contiguous features, so a tile spanning 256 features x 64 rows holds whole groups: the epilogue adds the
bias, takes each group's mean and centered variance in registers, and applies the affine transform, SiLU,
the multiplier and SiLU before the only write (eager: addmm, group_norm, silu, mul, silu: ~5 passes over
the output after the GEMM).

Why the transposed tile: Triton feeds the shared-memory (B) operand of fp32 wgmma through registers (hi/lo
split, restored to shared), a cost per B element that the tile's other side amortizes. The previous design
put the 256 features on the B side of a [64 x 256] tile (the B work per FLOP of a 128 x 128 tile, twice over)
and spilled at 255 registers. Each program now computes out^T[n, m] = sum_k W[n, k] x[m, k]: the 256-feature
weight tile is the register operand, the 64-row x tile [BK, 64] the K-contiguous shared one, groups lie along
axis 0 (a plain reduction), and the finished tile is transposed once for a row-major store.
Groups that are not a power of two or wider than 256 features take a GEMM + bias kernel and a separate
group kernel (one read + write).
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
1.2e-6."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

FUSED_MAX_GROUP = 256  # widest group normalized inside the GEMM tile
TILE, BK_FUSED, WARPS, STAGES = 16384, 16, 8, 4  # fused GEMM: accumulator elements a program, launch shape
# (256 x 64 at BK = 32 spills at 255 registers; BK = 16 needs 225 and no spills)


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
def silu(v):
    return v * tl.sigmoid(v)


@triton.jit
def gemm_groupnorm_silu_kernel(
    x_ptr, w_ptr, b_ptr, g_ptr, be_ptr, mul_ptr, out_ptr, M, N, K, eps, GS: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_N: tl.constexpr, EVEN_K: tl.constexpr,
):
    # transposed problem: rows = features (W, N x K), columns = batch rows (x, M x K); GROUP_N feature blocks
    # share each band of x tiles in L2
    pid_n, pid_m = tile_ids(N, M, BN, BM, GROUP_N)
    acc = gemm_tile(w_ptr, x_ptr, pid_n, pid_m, N, M, K, K, 1, K, 1, BN, BM, BK, EVEN_K)  # [BN, BM]
    rn = pid_n * BN + tl.arange(0, BN)
    rm = pid_m * BM + tl.arange(0, BM)
    nmask = rn < N
    y = tl.reshape(acc + tl.load(b_ptr + rn, mask=nmask, other=0.0)[:, None], (BN // GS, GS, BM))
    mean = tl.sum(y, axis=1) / GS
    d = y - mean[:, None, :]
    rstd = tl.rsqrt(tl.sum(d * d, axis=1) / GS + eps)
    v = tl.reshape(d * rstd[:, None, :], (BN, BM))
    v = v * tl.load(g_ptr + rn, mask=nmask, other=0.0)[:, None] + tl.load(be_ptr + rn, mask=nmask, other=0.0)[:, None]
    v = tl.trans(silu(silu(v) * tl.load(mul_ptr + rn, mask=nmask, other=0.0)[:, None]))
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], v, mask=(rm < M)[:, None] & nmask[None, :])


@triton.jit
def gemm_bias_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    acc = gemm_tile(x_ptr, w_ptr, pid_m, pid_n, M, N, K, K, 1, K, 1, BM, BN, BK, EVEN_K)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    y = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
    tl.store(out_ptr + rm.to(tl.int64)[:, None] * N + rn[None, :], y, mask=(rm < M)[:, None] & (rn < N)[None, :])


@triton.jit
def groupnorm_silu_kernel(y_ptr, g_ptr, be_ptr, mul_ptr, N, gs, eps, BLOCK: tl.constexpr):
    c = tl.program_id(1) * gs + tl.arange(0, BLOCK)
    mask = tl.arange(0, BLOCK) < gs
    row = y_ptr + tl.program_id(0).to(tl.int64) * N
    y = tl.load(row + c, mask=mask, other=0.0)
    mean = tl.sum(y, axis=0) / gs
    d = tl.where(mask, y - mean, 0.0)
    v = d * tl.rsqrt(tl.sum(d * d, axis=0) / gs + eps)
    v = v * tl.load(g_ptr + c, mask=mask, other=0.0) + tl.load(be_ptr + c, mask=mask, other=0.0)
    tl.store(row + c, silu(silu(v) * tl.load(mul_ptr + c, mask=mask, other=0.0)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiplier = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        gn = self.group_norm
        m, k = x.shape
        n = w.shape[0]
        gs = n // gn.num_groups
        out = torch.empty((m, n), device=x.device, dtype=torch.float32)
        if gs & (gs - 1) == 0 and gs <= FUSED_MAX_GROUP:
            bn = max(gs, min(128, triton.next_power_of_2(n)))
            bm = TILE // bn  # 256 features x 64 rows for 256-wide groups
            gemm_groupnorm_silu_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
                x, w, self.linear.bias, gn.weight, gn.bias, self.multiplier, out, m, n, k, float(gn.eps),
                GS=gs, BM=bm, BN=bn, BK=BK_FUSED, GROUP_N=8, EVEN_K=k % BK_FUSED == 0, num_warps=WARPS, num_stages=STAGES,
            )
        else:
            gemm_bias_kernel[(triton.cdiv(m, 128) * triton.cdiv(n, 128),)](
                x, w, self.linear.bias, out, m, n, k,
                BM=128, BN=128, BK=32, GROUP_M=8, EVEN_K=k % 32 == 0, num_warps=8, num_stages=3,
            )
            block = triton.next_power_of_2(gs)
            groupnorm_silu_kernel[(m, gn.num_groups)](
                out, gn.weight, gn.bias, self.multiplier, n, gs, float(gn.eps),
                BLOCK=block, num_warps=max(1, min(16, block // 256)),
            )
        return out
