"""GroupNorm (affine) + SiLU, forward and backward, in Triton.

x (N, C, H, W) is viewed as N*C rows of H*W; a group is C/G consecutive rows. Every kernel works on
[rows x row-chunk] tiles (chunks of up to 1024, short rows stacked), with per-row values as vectors.

Forward: (1) each row is streamed once and leaves its (mean, M2), merging tile statistics with
Chan's formula (no catastrophic cancellation of a sum-of-squares); (2) a tiny kernel merges each group's
rows into its mean and rstd, which are saved for the backward; (3) one elementwise pass reads x again and
writes y = silu((x - mean) rstd w + b) -- the normalized tensor is never stored. Eager's group_norm writes
its output and silu reads it back and writes another full tensor.

Backward: (1) each row of x and dy is read once; the pass recomputes z and sigmoid(z) in registers and
sums dz = dy silu'(z) and dz xhat over the row (per (n, c) partials); (2) a small kernel adds those partials over
the batch in a fixed order into the weight and bias gradients (deterministic); (3) one elementwise pass
reads x and dy again and writes dx = rstd (w dz - mean_g(w dz) - xhat mean_g(w dz xhat)), each row
forming its group's two sums from the C/G per-row partials. Eager's autograd runs the SiLU backward as its
own full pass, writing a full-size gradient that the group-norm backward kernels then read twice."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK_HW = 1024  # elements of a row per tile (fewer for short rows)
TILE = 4096  # elements per [rows x row-chunk] tile: short rows are stacked BLOCK_R to a tile
BLOCK_C = 256  # channels per program of the weight/bias merge
BLOCK_G = 64  # groups per program of the group-statistics merge


@triton.jit
def row_stats_kernel(x_ptr, mean_ptr, m2_ptr, rows, hw, BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr):
    # (mean, M2) of BLOCK_R rows, streamed in [BLOCK_R, BLOCK_HW] tiles merged with Chan's formula
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    base = x_ptr + r.to(tl.int64)[:, None] * hw
    cnt = tl.zeros([BLOCK_R], dtype=tl.float32)
    mean = tl.zeros([BLOCK_R], dtype=tl.float32)
    m2 = tl.zeros([BLOCK_R], dtype=tl.float32)
    for start in range(0, hw, BLOCK_HW):
        offs = start + tl.arange(0, BLOCK_HW)[None, :]
        mask = rmask[:, None] & (offs < hw)
        x = tl.load(base + offs, mask=mask, other=0.0)
        n_b = tl.minimum(hw - start, BLOCK_HW).to(tl.float32)
        mean_b = tl.sum(x, axis=1) / n_b
        dev = tl.where(mask, x - mean_b[:, None], 0.0)
        m2_b = tl.sum(dev * dev, axis=1)
        total = cnt + n_b
        delta = mean_b - mean
        mean = mean + delta * (n_b / total)
        m2 = m2 + m2_b + delta * delta * (cnt * n_b / total)
        cnt = total
    tl.store(mean_ptr + r, mean, mask=rmask)
    tl.store(m2_ptr + r, m2, mask=rmask)


@triton.jit
def group_stats_kernel(
    row_mean_ptr, row_m2_ptr, mean_ptr, rstd_ptr, groups, cpg, hw, eps,
    BLOCK_G: tl.constexpr, BLOCK_CPG: tl.constexpr,
):
    # every row of a group has hw elements: mean = mean of the row means,
    # M2 = sum of the rows' M2 + hw * sum (row mean - mean)^2
    g = tl.program_id(0) * BLOCK_G + tl.arange(0, BLOCK_G)
    i = tl.arange(0, BLOCK_CPG)[None, :]
    gmask = g < groups
    mask = gmask[:, None] & (i < cpg)
    idx = g[:, None] * cpg + i
    rm = tl.load(row_mean_ptr + idx, mask=mask, other=0.0)
    r2 = tl.load(row_m2_ptr + idx, mask=mask, other=0.0)
    mean = tl.sum(rm, axis=1) / cpg
    dev = tl.where(mask, rm - mean[:, None], 0.0)
    m2 = tl.sum(r2, axis=1) + hw * tl.sum(dev * dev, axis=1)
    tl.store(mean_ptr + g, mean, mask=gmask)
    tl.store(rstd_ptr + g, tl.rsqrt(m2 / (cpg * hw) + eps), mask=gmask)


@triton.jit
def gn_silu_fwd_kernel(
    x_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, y_ptr, rows, channels, cpg, hw,
    BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # rows n * C + c
    rmask = r < rows
    c = r % channels
    grp = r // cpg  # n * G + g
    scale = tl.load(rstd_ptr + grp, mask=rmask, other=0.0) * tl.load(w_ptr + c, mask=rmask, other=0.0)
    shift = tl.load(b_ptr + c, mask=rmask, other=0.0) - tl.load(mean_ptr + grp, mask=rmask, other=0.0) * scale
    offs = tl.program_id(1) * BLOCK_HW + tl.arange(0, BLOCK_HW)[None, :]
    mask = rmask[:, None] & (offs < hw)
    p = r.to(tl.int64)[:, None] * hw + offs
    x = tl.load(x_ptr + p, mask=mask, other=0.0)
    z = x * scale[:, None] + shift[:, None]
    tl.store(y_ptr + p, z / (1.0 + tl.exp(-z)), mask=mask)


@triton.jit
def gn_silu_bwd_rows_kernel(
    x_ptr, dy_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, sum_dz_ptr, sum_dzx_ptr, rows, channels, cpg, hw,
    BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr,
):
    # per row: sum of dz = dy silu'(z) and of dz xhat
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    c = r % channels
    grp = r // cpg
    mean = tl.load(mean_ptr + grp, mask=rmask, other=0.0)[:, None]
    rstd = tl.load(rstd_ptr + grp, mask=rmask, other=0.0)[:, None]
    w = tl.load(w_ptr + c, mask=rmask, other=0.0)[:, None]
    b = tl.load(b_ptr + c, mask=rmask, other=0.0)[:, None]
    acc_dz = tl.zeros([BLOCK_R, BLOCK_HW], dtype=tl.float32)
    acc_dzx = tl.zeros([BLOCK_R, BLOCK_HW], dtype=tl.float32)
    for start in range(0, hw, BLOCK_HW):
        offs = start + tl.arange(0, BLOCK_HW)[None, :]
        mask = rmask[:, None] & (offs < hw)
        p = r.to(tl.int64)[:, None] * hw + offs
        x = tl.load(x_ptr + p, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + p, mask=mask, other=0.0)
        xhat = (x - mean) * rstd
        z = xhat * w + b
        s = 1.0 / (1.0 + tl.exp(-z))
        dz = dy * s * (1.0 + z * (1.0 - s))  # masked lanes: dy = 0
        acc_dz += dz
        acc_dzx += dz * xhat
    tl.store(sum_dz_ptr + r, tl.sum(acc_dz, axis=1), mask=rmask)
    tl.store(sum_dzx_ptr + r, tl.sum(acc_dzx, axis=1), mask=rmask)


@triton.jit
def channel_merge_kernel(sum_dz_ptr, sum_dzx_ptr, dw_ptr, db_ptr, batch, channels, BLOCK_C: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = cols < channels
    acc_w = tl.zeros([BLOCK_C], dtype=tl.float32)
    acc_b = tl.zeros([BLOCK_C], dtype=tl.float32)
    for n in range(0, batch):
        acc_b += tl.load(sum_dz_ptr + n * channels + cols, mask=mask, other=0.0)
        acc_w += tl.load(sum_dzx_ptr + n * channels + cols, mask=mask, other=0.0)
    tl.store(dw_ptr + cols, acc_w, mask=mask)
    tl.store(db_ptr + cols, acc_b, mask=mask)


@triton.jit
def gn_silu_bwd_dx_kernel(
    x_ptr, dy_ptr, mean_ptr, rstd_ptr, w_ptr, b_ptr, sum_dz_ptr, sum_dzx_ptr, dx_ptr, rows, channels, cpg, hw,
    BLOCK_R: tl.constexpr, BLOCK_HW: tl.constexpr, BLOCK_CPG: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    c = r % channels
    grp = r // cpg
    # each row's group sums of dxhat = w dz and of dxhat * xhat, from the group's per-row partials
    first = (grp * cpg)[:, None]  # first row of the group
    i = tl.arange(0, BLOCK_CPG)[None, :]
    gmask = rmask[:, None] & (i < cpg)
    wg = tl.load(w_ptr + (first + i) % channels, mask=gmask, other=0.0)
    g_dz = tl.sum(wg * tl.load(sum_dz_ptr + first + i, mask=gmask, other=0.0), axis=1)[:, None]
    g_dzx = tl.sum(wg * tl.load(sum_dzx_ptr + first + i, mask=gmask, other=0.0), axis=1)[:, None]
    inv_m = 1.0 / (cpg * hw)
    mean = tl.load(mean_ptr + grp, mask=rmask, other=0.0)[:, None]
    rstd = tl.load(rstd_ptr + grp, mask=rmask, other=0.0)[:, None]
    w = tl.load(w_ptr + c, mask=rmask, other=0.0)[:, None]
    b = tl.load(b_ptr + c, mask=rmask, other=0.0)[:, None]
    offs = tl.program_id(1) * BLOCK_HW + tl.arange(0, BLOCK_HW)[None, :]
    mask = rmask[:, None] & (offs < hw)
    p = r.to(tl.int64)[:, None] * hw + offs
    x = tl.load(x_ptr + p, mask=mask, other=0.0)
    dy = tl.load(dy_ptr + p, mask=mask, other=0.0)
    xhat = (x - mean) * rstd
    z = xhat * w + b
    s = 1.0 / (1.0 + tl.exp(-z))
    dz = dy * s * (1.0 + z * (1.0 - s))
    dx = rstd * (w * dz - g_dz * inv_m - xhat * (g_dzx * inv_m))
    tl.store(dx_ptr + p, dx, mask=mask)


def _tiles(rows, hw):
    """(BLOCK_R, BLOCK_HW): row chunks of up to MAX_BLOCK_HW, short rows stacked into TILE-element tiles."""
    block_hw = min(MAX_BLOCK_HW, triton.next_power_of_2(hw))
    return min(TILE // block_hw, triton.next_power_of_2(rows)), block_hw


class GroupNormSiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, num_groups, eps):
        x = x.contiguous()
        batch, channels = x.shape[0], x.shape[1]
        hw = x.numel() // (batch * channels)
        cpg = channels // num_groups
        rows, groups = batch * channels, batch * num_groups
        block_r, block_hw = _tiles(rows, hw)
        dev = x.device
        row_mean = torch.empty(rows, device=dev, dtype=torch.float32)
        row_m2 = torch.empty(rows, device=dev, dtype=torch.float32)
        row_stats_kernel[(triton.cdiv(rows, block_r),)](
            x, row_mean, row_m2, rows, hw, BLOCK_R=block_r, BLOCK_HW=block_hw, num_warps=8
        )
        mean = torch.empty(groups, device=dev, dtype=torch.float32)
        rstd = torch.empty(groups, device=dev, dtype=torch.float32)
        group_stats_kernel[(triton.cdiv(groups, BLOCK_G),)](
            row_mean, row_m2, mean, rstd, groups, cpg, hw, eps,
            BLOCK_G=BLOCK_G, BLOCK_CPG=triton.next_power_of_2(cpg),
        )
        y = torch.empty_like(x)
        gn_silu_fwd_kernel[(triton.cdiv(rows, block_r), triton.cdiv(hw, block_hw))](
            x, mean, rstd, weight, bias, y, rows, channels, cpg, hw,
            BLOCK_R=block_r, BLOCK_HW=block_hw, num_warps=8,
        )
        ctx.save_for_backward(x, mean, rstd, weight, bias)
        ctx.cpg = cpg
        return y

    @staticmethod
    def backward(ctx, dy):
        x, mean, rstd, weight, bias = ctx.saved_tensors
        dy = dy.contiguous()
        cpg = ctx.cpg
        batch, channels = x.shape[0], x.shape[1]
        hw = x.numel() // (batch * channels)
        rows = batch * channels
        block_r, block_hw = _tiles(rows, hw)
        sum_dz = torch.empty(rows, device=x.device, dtype=torch.float32)
        sum_dzx = torch.empty(rows, device=x.device, dtype=torch.float32)
        gn_silu_bwd_rows_kernel[(triton.cdiv(rows, block_r),)](
            x, dy, mean, rstd, weight, bias, sum_dz, sum_dzx, rows, channels, cpg, hw,
            BLOCK_R=block_r, BLOCK_HW=block_hw, num_warps=8,
        )
        dweight, dbias = torch.empty_like(weight), torch.empty_like(bias)
        channel_merge_kernel[(triton.cdiv(channels, BLOCK_C),)](
            sum_dz, sum_dzx, dweight, dbias, batch, channels, BLOCK_C=BLOCK_C
        )
        dx = torch.empty_like(x)
        gn_silu_bwd_dx_kernel[(triton.cdiv(rows, block_r), triton.cdiv(hw, block_hw))](
            x, dy, mean, rstd, weight, bias, sum_dz, sum_dzx, dx, rows, channels, cpg, hw,
            BLOCK_R=block_r, BLOCK_HW=block_hw, BLOCK_CPG=triton.next_power_of_2(cpg), num_warps=8,
        )
        return dx, dweight, dbias, None, None


class ModelNew(nn.Module):
    def __init__(self, channels: int, num_groups: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(channels))
        self.bias = nn.Parameter(0.1 * torch.randn(channels))
        self.num_groups = num_groups
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return GroupNormSiLU.apply(x, self.weight, self.bias, self.num_groups, float(self.eps))
