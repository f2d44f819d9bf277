"""QK RMSNorm + rotary embedding, forward and backward, in Triton (one kernel per tensor and pass).

Each program holds a tile of rows as their two halves [x1 | x2] in registers, so rotate_half is just a swap
of the two register tiles (no gather, no concatenation in memory).

Forward: one pass per tensor reads x (and the cos/sin rows of its positions) once and writes
y = rope(x * rsqrt(mean(x^2) + eps) * w); the normalized tensor is never stored. Eager runs pow, mean,
rsqrt, two multiplies, chunk/neg/cat and the rope's multiply-adds as separate kernels, each a full pass.

Backward: one pass per tensor reads x and dy once, recomputes the row's rsqrt in registers, undoes the
rotation (dn = dy * cos + [dy2 * sin2 | -dy1 * sin1]), and writes dx = r (dn w - xhat mean(dn w xhat)); the
same pass sums dn * xhat over its rows into a row of per-program partials for the scale's gradient, which
a second small kernel adds up in a fixed order (deterministic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TILE = 4096  # elements per [rows x head_dim] tile
ROW_TILES = 16  # tiles one backward program walks through (at most), summing its scale-gradient partial


@triton.jit
def qknorm_rope_fwd(
    x_ptr, w_ptr, cos_ptr, sin_ptr, y_ptr, rows, seq, half, eps,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.arange(0, BLOCK_H)[None, :]
    d = 2 * half
    mask = (r < rows) & (c < half)
    base = r.to(tl.int64) * d + c
    x1 = tl.load(x_ptr + base, mask=mask, other=0.0)
    x2 = tl.load(x_ptr + base + half, mask=mask, other=0.0)
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / d + eps)[:, None]
    n1 = x1 * rstd * tl.load(w_ptr + c, mask=c < half, other=0.0)
    n2 = x2 * rstd * tl.load(w_ptr + c + half, mask=c < half, other=0.0)
    pos = (r % seq) * d + c
    cos1 = tl.load(cos_ptr + pos, mask=mask, other=0.0)
    cos2 = tl.load(cos_ptr + pos + half, mask=mask, other=0.0)
    sin1 = tl.load(sin_ptr + pos, mask=mask, other=0.0)
    sin2 = tl.load(sin_ptr + pos + half, mask=mask, other=0.0)
    tl.store(y_ptr + base, n1 * cos1 - n2 * sin1, mask=mask)
    tl.store(y_ptr + base + half, n2 * cos2 + n1 * sin2, mask=mask)


@triton.jit
def qknorm_rope_bwd(
    x_ptr, w_ptr, cos_ptr, sin_ptr, dy_ptr, dx_ptr, part_ptr, rows, seq, half, eps,
    row_tiles, BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr,
):
    cols = tl.arange(0, BLOCK_H)
    c = cols[None, :]
    d = 2 * half
    w1 = tl.load(w_ptr + c, mask=c < half, other=0.0)
    w2 = tl.load(w_ptr + c + half, mask=c < half, other=0.0)
    acc1 = tl.zeros([BLOCK_H], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK_H], dtype=tl.float32)
    first = tl.program_id(0) * row_tiles * BLOCK_R
    for t in range(row_tiles):
        r = first + t * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
        mask = (r < rows) & (c < half)
        base = r.to(tl.int64) * d + c
        x1 = tl.load(x_ptr + base, mask=mask, other=0.0)
        x2 = tl.load(x_ptr + base + half, mask=mask, other=0.0)
        dy1 = tl.load(dy_ptr + base, mask=mask, other=0.0)
        dy2 = tl.load(dy_ptr + base + half, mask=mask, other=0.0)
        pos = (r % seq) * d + c
        cos1 = tl.load(cos_ptr + pos, mask=mask, other=0.0)
        cos2 = tl.load(cos_ptr + pos + half, mask=mask, other=0.0)
        sin1 = tl.load(sin_ptr + pos, mask=mask, other=0.0)
        sin2 = tl.load(sin_ptr + pos + half, mask=mask, other=0.0)
        # y1 = n1 cos1 - n2 sin1, y2 = n2 cos2 + n1 sin2  =>  dn1 = dy1 cos1 + dy2 sin2, dn2 = dy2 cos2 - dy1 sin1
        dn1 = dy1 * cos1 + dy2 * sin2
        dn2 = dy2 * cos2 - dy1 * sin1
        rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / d + eps)[:, None]
        xh1 = x1 * rstd
        xh2 = x2 * rstd
        acc1 += tl.sum(dn1 * xh1, axis=0)
        acc2 += tl.sum(dn2 * xh2, axis=0)
        g1 = dn1 * w1
        g2 = dn2 * w2
        proj = ((tl.sum(g1 * xh1, axis=1) + tl.sum(g2 * xh2, axis=1)) / d)[:, None]
        tl.store(dx_ptr + base, rstd * (g1 - xh1 * proj), mask=mask)
        tl.store(dx_ptr + base + half, rstd * (g2 - xh2 * proj), mask=mask)
    prow = part_ptr + tl.program_id(0) * d
    tl.store(prow + cols, acc1, mask=cols < half)
    tl.store(prow + half + cols, acc2, mask=cols < half)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, parts, d, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(0, parts):
        acc += tl.load(part_ptr + i * d + cols, mask=cols < d, other=0.0)
    tl.store(out_ptr + cols, acc, mask=cols < d)


def _tiles(rows, d):
    """(BLOCK_R, BLOCK_H): BLOCK_R rows of two BLOCK_H-wide halves to a tile of TILE elements."""
    block_h = triton.next_power_of_2(d // 2)
    return min(max(1, TILE // (2 * block_h)), triton.next_power_of_2(rows)), block_h


def _forward(x, w, cos, sin, eps):
    d = x.shape[-1]
    rows, seq = x.numel() // d, cos.shape[0]
    block_r, block_h = _tiles(rows, d)
    y = torch.empty_like(x)
    qknorm_rope_fwd[(triton.cdiv(rows, block_r),)](
        x, w, cos, sin, y, rows, seq, d // 2, eps, BLOCK_R=block_r, BLOCK_H=block_h, num_warps=8
    )
    return y


def _backward(x, w, cos, sin, dy, eps):
    d = x.shape[-1]
    rows, seq = x.numel() // d, cos.shape[0]
    block_r, block_h = _tiles(rows, d)
    row_tiles = min(ROW_TILES, triton.cdiv(rows, block_r))
    parts = triton.cdiv(rows, block_r * row_tiles)
    dx = torch.empty_like(x)
    partial = torch.empty((parts, d), device=x.device, dtype=torch.float32)
    qknorm_rope_bwd[(parts,)](
        x, w, cos, sin, dy, dx, partial, rows, seq, d // 2, eps, row_tiles,
        BLOCK_R=block_r, BLOCK_H=block_h, num_warps=8,
    )
    dw = torch.empty_like(w)
    block_d = min(1024, triton.next_power_of_2(d))
    column_sum_kernel[(triton.cdiv(d, block_d),)](partial, dw, parts, d, BLOCK_D=block_d)
    return dx, dw


class QKNormRope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin, q_weight, k_weight, eps):
        q, k, cos, sin = q.contiguous(), k.contiguous(), cos.contiguous(), sin.contiguous()
        yq = _forward(q, q_weight, cos, sin, eps)
        yk = _forward(k, k_weight, cos, sin, eps)
        ctx.save_for_backward(q, k, cos, sin, q_weight, k_weight)
        ctx.eps = eps
        return yq, yk

    @staticmethod
    def backward(ctx, dyq, dyk):
        q, k, cos, sin, q_weight, k_weight = ctx.saved_tensors
        dq, dwq = _backward(q, q_weight, cos, sin, dyq.contiguous(), ctx.eps)
        dk, dwk = _backward(k, k_weight, cos, sin, dyk.contiguous(), ctx.eps)
        return dq, dk, None, None, dwq, dwk, None


class ModelNew(nn.Module):
    def __init__(self, head_dim: int, eps: float):
        super().__init__()
        self.q_weight = nn.Parameter(1.0 + 0.1 * torch.randn(head_dim))
        self.k_weight = nn.Parameter(1.0 + 0.1 * torch.randn(head_dim))
        self.eps = eps

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return QKNormRope.apply(q, k, cos, sin, self.q_weight, self.k_weight, float(self.eps))
