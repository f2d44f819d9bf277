"""Bias + exact GELU + dropout, forward and backward, in Triton.

Forward: one elementwise pass reads x and the uniforms u once and writes y = gelu(x + b) * [u >= p] / (1 - p);
nothing else is stored (the mask is recomputed from u in the backward instead of being written as a tensor).
Eager runs the bias add, the GELU, the comparison, the cast, the multiply and the divide as separate
kernels, each a full read and write of a 16384 x 4096 tensor.

Backward: one pass reads x, u and dy once and writes dx = dy * [u >= p] / (1 - p) * gelu'(x + b), with the
GELU derivative recomputed from x in registers; the same pass sums its tile of dx over its rows into a
row of per-program partials for the bias gradient, which a second small kernel adds up in a fixed order
(deterministic). Eager's autograd runs the dropout, GELU and add backward as separate kernels and then a
separate column reduction over dx."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_R, BLOCK_D = 16, 256  # one tile: 16 rows x 256 columns
ROW_TILES = 8  # tiles (of BLOCK_R rows) one backward program walks down, summing its bias-gradient partial


@triton.jit
def bias_gelu_dropout_fwd(
    x_ptr, u_ptr, b_ptr, y_ptr, rows, d, p, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)[None, :]
    mask = (r < rows) & (c < d)
    offs = r.to(tl.int64) * d + c
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0)
    b = tl.load(b_ptr + c, mask=c < d, other=0.0)
    h = x + b
    g = 0.5 * h * (1.0 + tl.erf(h * 0.7071067811865476))
    keep = (u >= p).to(tl.float32)
    tl.store(y_ptr + offs, g * keep / (1.0 - p), mask=mask)


@triton.jit
def bias_gelu_dropout_bwd(
    x_ptr, u_ptr, b_ptr, dy_ptr, dx_ptr, part_ptr, rows, d, p,
    BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, ROW_TILES: tl.constexpr,
):
    # dx for ROW_TILES tiles of rows down one column block; their column sums of dx go to this program's row
    # of partials (the bias gradient is the sum of dx over the rows)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    c = cols[None, :]
    b = tl.load(b_ptr + c, mask=c < d, other=0.0)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    first = tl.program_id(0) * (BLOCK_R * ROW_TILES)
    for t in range(ROW_TILES):
        r = first + t * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
        mask = (r < rows) & (c < d)
        offs = r.to(tl.int64) * d + c
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        u = tl.load(u_ptr + offs, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0)
        h = x + b
        # d/dh [h * Phi(h)] = Phi(h) + h * phi(h)
        cdf = 0.5 * (1.0 + tl.erf(h * 0.7071067811865476))
        pdf = 0.3989422804014327 * tl.exp(-0.5 * h * h)
        keep = (u >= p).to(tl.float32)
        dx = dy * keep / (1.0 - p) * (cdf + h * pdf)
        dx = tl.where(mask, dx, 0.0)
        tl.store(dx_ptr + offs, dx, mask=mask)
        acc += tl.sum(dx, axis=0)
    tl.store(part_ptr + tl.program_id(0) * d + cols, acc, mask=cols < d)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, parts, d, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(0, parts):
        acc += tl.load(part_ptr + i * d + cols, mask=cols < d, other=0.0)
    tl.store(out_ptr + cols, acc, mask=cols < d)


class BiasGeluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, u, bias, p):
        x, u = x.contiguous(), u.contiguous()
        d = bias.numel()
        rows = x.numel() // d
        y = torch.empty_like(x)
        grid = (triton.cdiv(rows, BLOCK_R), triton.cdiv(d, BLOCK_D))
        bias_gelu_dropout_fwd[grid](x, u, bias, y, rows, d, p, BLOCK_R=BLOCK_R, BLOCK_D=BLOCK_D)
        ctx.save_for_backward(x, u, bias)
        ctx.p = p
        return y

    @staticmethod
    def backward(ctx, dy):
        x, u, bias = ctx.saved_tensors
        dy = dy.contiguous()
        d = bias.numel()
        rows = x.numel() // d
        parts = triton.cdiv(rows, BLOCK_R * ROW_TILES)
        dx = torch.empty_like(x)
        partial = torch.empty((parts, d), device=x.device, dtype=torch.float32)
        bias_gelu_dropout_bwd[(parts, triton.cdiv(d, BLOCK_D))](
            x, u, bias, dy, dx, partial, rows, d, ctx.p,
            BLOCK_R=BLOCK_R, BLOCK_D=BLOCK_D, ROW_TILES=ROW_TILES,
        )
        dbias = torch.empty_like(bias)
        column_sum_kernel[(triton.cdiv(d, BLOCK_D),)](partial, dbias, parts, d, BLOCK_D=BLOCK_D)
        return dx, None, dbias, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, p: float):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(dim))
        self.p = p

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return BiasGeluDropout.apply(x, u, self.bias, float(self.p))
