"""LayerNorm, exact GELU and a residual add, forward and backward in Triton.

Forward: one kernel per block of rows keeps each row in registers, takes the mean and the variance of the
centred row there (two-pass statistics, one read), and writes y = gelu(xhat * w + b) + x, with the row's
mean and rstd (8 bytes a row) saved for the backward; the normalized row and the GELU's input are never
written. Eager runs layer_norm, gelu and add as three kernels, each writing a [tokens, dim] intermediate
(and autograd keeps the norm's output alive for the GELU's backward).

Backward: from the saved x, mean and rstd the kernel recomputes xhat = (x - mean) * rstd and the GELU's
input a = xhat * w + b in registers, then da = dy * gelu'(a) with gelu'(a) = Phi(a) + a * phi(a), g = da * w,
    dx = dy + rstd * (g - mean(g) - xhat * mean(g * xhat)),   dw = sum over rows of da * xhat,   db = sum of da.
One kernel reads x and dy once (each row stays in registers for its two reductions), writes dx and keeps
running per-column partials of dw and db in registers across the rows it owns (a fixed, strided set of row
blocks per program); a second small kernel adds the programs' partials column by column in a fixed order, so
dw and db are deterministic. Eager's backward runs gelu_backward, the norm's dx kernel, a separate dw/db
reduction and the residual add, with intermediates written and read between them."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# floats per [rows, dim] tile: on a GPU what the registers hold (whole rows up to 4096 wide, several shorter
# rows at once); under the CPU interpreter, whose cost is a fixed overhead per op of each program, 8192
# (a small problem in a few programs; bigger tiles make the sm_90 compile check slow)
TILE_GPU, TILE_CPU = 4096, 8192
MAX_PARTS = 512  # programs of the backward, i.e. rows of dw / db partials
INV_SQRT2 = tl.constexpr(0.7071067811865476)
INV_SQRT_2PI = tl.constexpr(0.3989422804014327)


@triton.jit
def ln_gelu_residual_forward_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, rows, D, eps, R: tl.constexpr, BD: tl.constexpr
):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, BD)
    rmask = r < rows
    cmask = c < D
    mask = rmask[:, None] & cmask[None, :]
    offs = r.to(tl.int64)[:, None] * D + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    mean = tl.sum(x, axis=1) / D
    xc = tl.where(mask, x - mean[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, axis=1) / D + eps)
    w = tl.load(w_ptr + c, mask=cmask, other=0.0)
    b = tl.load(b_ptr + c, mask=cmask, other=0.0)
    a = xc * rstd[:, None] * w[None, :] + b[None, :]
    y = 0.5 * a * (1.0 + tl.math.erf(a * INV_SQRT2)) + x
    tl.store(y_ptr + offs, y, mask=mask)
    tl.store(mean_ptr + r, mean, mask=rmask)
    tl.store(rstd_ptr + r, rstd, mask=rmask)


@triton.jit
def ln_gelu_residual_backward_kernel(
    x_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, dy_ptr, dx_ptr, part_ptr, rows, D, n_blocks, n_parts,
    R: tl.constexpr, BD: tl.constexpr,
):
    pid = tl.program_id(0)
    c = tl.arange(0, BD)
    cmask = c < D
    w = tl.load(w_ptr + c, mask=cmask, other=0.0)[None, :]
    b = tl.load(b_ptr + c, mask=cmask, other=0.0)[None, :]
    dw = tl.zeros([BD], dtype=tl.float32)
    db = tl.zeros([BD], dtype=tl.float32)
    for rb in range(pid, n_blocks, n_parts):
        r = rb * R + tl.arange(0, R)
        rmask = r < rows
        mask = rmask[:, None] & cmask[None, :]
        offs = r.to(tl.int64)[:, None] * D + c[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0)
        mean = tl.load(mean_ptr + r, mask=rmask, other=0.0)[:, None]
        rstd = tl.load(rstd_ptr + r, mask=rmask, other=0.0)[:, None]
        xhat = tl.where(mask, (x - mean) * rstd, 0.0)
        a = xhat * w + b
        gelu_grad = 0.5 * (1.0 + tl.math.erf(a * INV_SQRT2)) + a * INV_SQRT_2PI * tl.exp(-0.5 * a * a)
        da = tl.where(mask, dy * gelu_grad, 0.0)
        g = da * w
        mg = (tl.sum(g, axis=1) / D)[:, None]
        mgx = (tl.sum(g * xhat, axis=1) / D)[:, None]
        tl.store(dx_ptr + offs, dy + rstd * (g - mg - xhat * mgx), mask=mask)
        dw += tl.sum(da * xhat, axis=0)
        db += tl.sum(da, axis=0)
    tl.store(part_ptr + pid * D + c, dw, mask=cmask)
    tl.store(part_ptr + (n_parts + pid) * D + c, db, mask=cmask)


@triton.jit
def column_sum_kernel(part_ptr, dw_ptr, db_ptr, n_parts, D, BP: tl.constexpr, BLOCK: tl.constexpr):
    """Partial rows [0, n_parts) are dw's, [n_parts, 2 n_parts) db's; each summed in a fixed order, BP rows at
    a time into a [BP, BLOCK] accumulator whose rows are added at the end."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cmask = c < D
    dw = tl.zeros([BP, BLOCK], dtype=tl.float32)
    db = tl.zeros([BP, BLOCK], dtype=tl.float32)
    for p0 in range(0, n_parts, BP):
        p = p0 + tl.arange(0, BP)
        mask = (p < n_parts)[:, None] & cmask[None, :]
        dw += tl.load(part_ptr + p[:, None] * D + c[None, :], mask=mask, other=0.0)
        db += tl.load(part_ptr + (n_parts + p)[:, None] * D + c[None, :], mask=mask, other=0.0)
    tl.store(dw_ptr + c, tl.sum(dw, axis=0), mask=cmask)
    tl.store(db_ptr + c, tl.sum(db, axis=0), mask=cmask)


def _tiling(x2):
    """(rows per program, padded row width) for the [rows, dim] tensor x2."""
    rows, D = x2.shape
    bd = triton.next_power_of_2(D)
    tile = TILE_GPU if x2.is_cuda else TILE_CPU
    return max(1, min(tile // bd, triton.next_power_of_2(rows))), bd


class LayerNormGELUResidualFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        D = weight.numel()
        x2 = x.contiguous().view(-1, D)
        rows = x2.shape[0]
        R, BD = _tiling(x2)
        y = torch.empty_like(x2)
        mean = torch.empty(rows, device=x.device, dtype=torch.float32)
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        ln_gelu_residual_forward_kernel[(triton.cdiv(rows, R),)](
            x2, weight, bias, y, mean, rstd, rows, D, eps, R=R, BD=BD, num_warps=8
        )
        ctx.save_for_backward(x2, weight, bias, mean, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, bias, mean, rstd = ctx.saved_tensors
        rows, D = x2.shape
        dy2 = dy.contiguous().view(rows, D)
        R, BD = _tiling(x2)
        n_blocks = triton.cdiv(rows, R)
        n_parts = min(n_blocks, MAX_PARTS)
        dx = torch.empty_like(x2)
        part = torch.empty((2, n_parts, D), device=x2.device, dtype=torch.float32)
        ln_gelu_residual_backward_kernel[(n_parts,)](
            x2, weight, bias, mean, rstd, dy2, dx, part, rows, D, n_blocks, n_parts, R=R, BD=BD, num_warps=8
        )
        dw, db = torch.empty_like(weight), torch.empty_like(weight)
        column_sum_kernel[(triton.cdiv(D, 128),)](part, dw, db, n_parts, D, BP=32, BLOCK=128)
        return dx.view(ctx.shape), dw, db, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LayerNormGELUResidualFunction.apply(x, self.weight, self.bias, self.eps)
