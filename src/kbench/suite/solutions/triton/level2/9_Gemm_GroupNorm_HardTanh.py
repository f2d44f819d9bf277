"""Linear + GroupNorm + HardTanh to [-2, 2] as one Triton GEMM whose tiles hold whole groups: the epilogue
adds the bias, takes each group's mean and centered variance in registers, and applies the affine transform
and the clamp before the only write (34 MB at the full size, where a group is 128 features: one group a
[128 x 128] tile, reduced along its rows). Eager writes the addmm output, then group_norm and hardtanh each
read a full-size tensor and write one.
The tile's 128 lanes are laid out as segments of SEG = next_pow2(group size) lanes, one group a segment
(lanes past a group's end compute on column 0 and are masked: none for power-of-two groups), viewed as
(rows, groups, SEG) when a tile holds several groups. Groups wider than 128 features are split into 128-lane
segments: the GEMM then writes y and each segment's mean and centered sum of squares, and one program per
(row, group) merges them (Chan's parallel formula, fixed order) and normalizes in place.

The GEMM (69 GFLOP at the full size) runs on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32), which keeps fp32-level accuracy -- far inside the 1e-4 tolerance -- where cuBLAS with
TF32 off runs on the fp32 SIMT units (~75 % of their peak, the ceiling the eager and compiled references
share). Programs are grouped 8 row-tiles at a time so neighbouring programs reuse the same weight tiles from
L2.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
3.6e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 128, 64  # 8 warps, 3 stages of 64 KB: 92 TFLOP/s on an H200 (78 at BK = 32, 57 at 128 x 256)


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
def gemm_tile(x_ptr, w_ptr, rows, cols, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr):
    """fp32 [BM, BN] tile of x @ W^T on 3xTF32 tensor cores, for in-bounds indices `rows` of x [M, K] and
    `cols` of W [N, K]: both operands are K-contiguous, the layout tensor cores read directly."""
    rk = tl.arange(0, BK)
    px = x_ptr + rows.to(tl.int64)[:, None] * K + rk[None, :]
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
def linear_groupnorm_kernel(
    x_ptr, w_ptr, b_ptr, g_ptr, be_ptr, out_ptr, pmean_ptr, pm2_ptr, M, K, G, GS, S, eps,
    SEG: tl.constexpr, DENSE: tl.constexpr, ONE_SEG: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    # lane l is feature j = (seg % S) * SEG + l % SEG of group seg // S, seg = pid_n * GPT + l // SEG: a tile
    # holds GPT whole segments and a group is S segments (S == 1 whenever GPT > 1)
    GPT: tl.constexpr = BN // SEG
    N = G * GS
    NS = G * S
    pid_m, pid_n = tile_ids(M, NS * SEG, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    lane = tl.arange(0, BN)
    if DENSE:  # GS % SEG == 0: lane l is column pid_n * BN + l, contiguous loads and stores
        col = pid_n * BN + lane
        valid = col < N
    else:
        seg = pid_n * GPT + lane // SEG
        j = (seg % S) * SEG + lane % SEG
        valid = (j < GS) & (seg < NS)
        col = tl.where(valid, (seg // S) * GS + j, 0)
    # idle lanes compute on column 0 (in bounds) and are masked
    acc = gemm_tile(x_ptr, w_ptr, rm % M, tl.where(valid, col, 0), K, BM, BN, BK, EVEN_K)
    y = tl.where(valid[None, :], acc + tl.load(b_ptr + col, mask=valid, other=0.0)[None, :], 0.0)
    if GPT == 1:  # one segment a tile: row reductions
        mean = tl.sum(y, axis=1) / tl.minimum(SEG, GS - (pid_n % S) * SEG).to(tl.float32)
        d = tl.where(valid[None, :], y - mean[:, None], 0.0)
        m2 = tl.sum(d * d, axis=1)
        v = d * tl.rsqrt(m2 / GS + eps)[:, None]
    else:
        y3 = tl.reshape(y, (BM, GPT, SEG))
        mean3 = tl.sum(y3, axis=2) / GS
        d = tl.where(tl.reshape(valid, (GPT, SEG))[None, :, :], y3 - mean3[:, :, None], 0.0)
        v = tl.reshape(d * tl.rsqrt(tl.sum(d * d, axis=2) / GS + eps)[:, :, None], (BM, BN))
    offs = rm.to(tl.int64)[:, None] * N + col[None, :]
    mask = (rm < M)[:, None] & valid[None, :]
    if ONE_SEG:
        v = v * tl.load(g_ptr + col, mask=valid, other=0.0)[None, :]
        v = v + tl.load(be_ptr + col, mask=valid, other=0.0)[None, :]
        tl.store(out_ptr + offs, tl.minimum(tl.maximum(v, -2.0), 2.0), mask=mask)
    else:  # a segment of a wider group (GPT == 1): y and its statistics go to group_finish_kernel
        tl.store(out_ptr + offs, y, mask=mask)
        tl.store(pmean_ptr + rm.to(tl.int64) * NS + pid_n, mean, mask=rm < M)
        tl.store(pm2_ptr + rm.to(tl.int64) * NS + pid_n, m2, mask=rm < M)


@triton.jit
def group_finish_kernel(y_ptr, pmean_ptr, pm2_ptr, g_ptr, be_ptr, GS, S, eps,
                        SEG: tl.constexpr, BS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    k = tl.arange(0, BS)
    kmask = k < S
    poffs = row * tl.num_programs(1) * S + grp * S + k
    pmean = tl.load(pmean_ptr + poffs, mask=kmask, other=0.0)
    pm2 = tl.load(pm2_ptr + poffs, mask=kmask, other=0.0)
    cnt = tl.where(kmask, tl.minimum(SEG, GS - k * SEG), 0).to(tl.float32)  # features behind each partial
    mean = tl.sum(cnt * pmean, axis=0) / GS
    dm = pmean - mean
    rstd = tl.rsqrt(tl.sum(pm2 + cnt * dm * dm, axis=0) / GS + eps)
    c0 = grp * GS
    base = y_ptr + row * tl.num_programs(1) * GS + c0
    for start in range(0, GS, BLOCK):
        c = start + tl.arange(0, BLOCK)
        mask = c < GS
        v = (tl.load(base + c, mask=mask, other=0.0) - mean) * rstd
        v = v * tl.load(g_ptr + c0 + c, mask=mask, other=0.0) + tl.load(be_ptr + c0 + c, mask=mask, other=0.0)
        tl.store(base + c, tl.minimum(tl.maximum(v, -2.0), 2.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        m, k = x.shape
        n = w.shape[0]
        gn = self.group_norm
        groups = gn.num_groups
        gs = n // groups
        seg = min(triton.next_power_of_2(gs), BN)
        s = triton.cdiv(gs, seg)  # segments a group
        out = torch.empty((m, n), device=x.device, dtype=x.dtype)
        shape = (m, groups * s) if s > 1 else (1,)  # segment statistics, unused for whole-group tiles
        pmean = torch.empty(shape, device=x.device, dtype=torch.float32)
        pm2 = torch.empty_like(pmean)
        linear_groupnorm_kernel[(triton.cdiv(m, BM) * triton.cdiv(groups * s, BN // seg),)](
            x, w, self.linear.bias, gn.weight, gn.bias, out, pmean, pm2, m, k, groups, gs, s, float(gn.eps),
            SEG=seg, DENSE=gs % seg == 0, ONE_SEG=s == 1,
            BM=BM, BN=BN, BK=BK, GROUP_M=8, EVEN_K=k % BK == 0, num_warps=8, num_stages=3,
        )
        if s > 1:
            block = min(4096, triton.next_power_of_2(gs))
            group_finish_kernel[(m, groups)](
                out, pmean, pm2, gn.weight, gn.bias, gs, s, float(gn.eps),
                SEG=seg, BS=max(2, triton.next_power_of_2(s)), BLOCK=block, num_warps=max(1, min(8, block // 512)),
            )
        return out
