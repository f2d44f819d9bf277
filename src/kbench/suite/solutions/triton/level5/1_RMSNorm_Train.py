"""RMSNorm with a learned scale, forward and backward in Triton.

Forward: one kernel per block of rows keeps each row in registers, reduces sum(x^2) there and writes y =
x * rstd * w together with the row's rstd (4 bytes a row, saved for the backward); eager runs pow, mean,
add, rsqrt and two multiplies, each a kernel that writes its intermediate to memory.

Backward: with g = dy * w and rstd the saved per-row 1/sqrt(mean(x^2) + eps),
    dx = rstd * (g - x * rstd^2 * mean(g * x)),    dw = sum over rows of dy * x * rstd.
One kernel reads x and dy once per row (the row stays in registers for its reduction), writes dx and keeps
a running per-column partial of dw in registers across the rows it owns (a fixed, strided set of row
blocks per program); a second small kernel adds the programs' partials column by column in a fixed order,
so dw is deterministic. Eager's autograd replays the forward's chain of elementwise and reduction kernels
backwards, each reading and writing full [tokens, dim] intermediates."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# floats per [rows, dim] tile: on a GPU what the registers hold (whole rows up to 4096 wide, several shorter
# rows at once); under the CPU interpreter, whose cost is a fixed overhead per op of each program, 8192
# (a small problem in a few programs; bigger tiles make the sm_90 compile check slow)
TILE_GPU, TILE_CPU = 4096, 8192
MAX_PARTS = 512  # programs of the backward, i.e. rows of dw partials


@triton.jit
def rmsnorm_forward_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, rows, D, eps, R: tl.constexpr, BD: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    c = tl.arange(0, BD)
    rmask = r < rows
    cmask = c < D
    mask = rmask[:, None] & cmask[None, :]
    offs = r.to(tl.int64)[:, None] * D + c[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / D + eps)
    w = tl.load(w_ptr + c, mask=cmask, other=0.0)
    tl.store(y_ptr + offs, x * rstd[:, None] * w[None, :], mask=mask)
    tl.store(rstd_ptr + r, rstd, mask=rmask)


@triton.jit
def rmsnorm_backward_kernel(
    x_ptr, w_ptr, rstd_ptr, dy_ptr, dx_ptr, part_ptr, rows, D, n_blocks, n_parts,
    R: tl.constexpr, BD: tl.constexpr,
):
    pid = tl.program_id(0)
    c = tl.arange(0, BD)
    cmask = c < D
    w = tl.load(w_ptr + c, mask=cmask, other=0.0)
    dw = tl.zeros([BD], dtype=tl.float32)
    for rb in range(pid, n_blocks, n_parts):
        r = rb * R + tl.arange(0, R)
        rmask = r < rows
        mask = rmask[:, None] & cmask[None, :]
        offs = r.to(tl.int64)[:, None] * D + c[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        dy = tl.load(dy_ptr + offs, mask=mask, other=0.0)
        rstd = tl.load(rstd_ptr + r, mask=rmask, other=0.0)[:, None]
        g = dy * w[None, :]
        mgx = (tl.sum(g * x, axis=1) / D)[:, None]
        tl.store(dx_ptr + offs, rstd * (g - x * rstd * rstd * mgx), mask=mask)
        dw += tl.sum(dy * x * rstd, axis=0)
    tl.store(part_ptr + pid * D + c, dw, mask=cmask)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, n_parts, N, BP: tl.constexpr, BLOCK: tl.constexpr):
    """out [N] = the sum of the n_parts rows of part [n_parts, N] in a fixed order: BP rows at a time into a
    [BP, BLOCK] accumulator, whose rows are added at the end."""
    c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cmask = c < N
    acc = tl.zeros([BP, BLOCK], dtype=tl.float32)
    for p0 in range(0, n_parts, BP):
        p = p0 + tl.arange(0, BP)
        mask = (p < n_parts)[:, None] & cmask[None, :]
        acc += tl.load(part_ptr + p[:, None] * N + c[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + c, tl.sum(acc, axis=0), mask=cmask)


def _tiling(x2):
    """(rows per program, padded row width) for the [rows, dim] tensor x2."""
    rows, D = x2.shape
    bd = triton.next_power_of_2(D)
    tile = TILE_GPU if x2.is_cuda else TILE_CPU
    return max(1, min(tile // bd, triton.next_power_of_2(rows))), bd


class RMSNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        D = weight.numel()
        x2 = x.contiguous().view(-1, D)
        rows = x2.shape[0]
        R, BD = _tiling(x2)
        y = torch.empty_like(x2)
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        rmsnorm_forward_kernel[(triton.cdiv(rows, R),)](x2, weight, y, rstd, rows, D, eps, R=R, BD=BD, num_warps=8)
        ctx.save_for_backward(x2, weight, rstd)
        ctx.shape = x.shape
        return y.view(x.shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, rstd = ctx.saved_tensors
        rows, D = x2.shape
        dy2 = dy.contiguous().view(rows, D)
        R, BD = _tiling(x2)
        n_blocks = triton.cdiv(rows, R)
        n_parts = min(n_blocks, MAX_PARTS)
        dx = torch.empty_like(x2)
        part = torch.empty((n_parts, D), device=x2.device, dtype=torch.float32)
        rmsnorm_backward_kernel[(n_parts,)](
            x2, weight, rstd, dy2, dx, part, rows, D, n_blocks, n_parts, R=R, BD=BD, num_warps=8
        )
        dw = torch.empty_like(weight)
        column_sum_kernel[(triton.cdiv(D, 128),)](part, dw, n_parts, D, BP=32, BLOCK=128)
        return dx.view(ctx.shape), dw, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return RMSNormFunction.apply(x, self.weight, self.eps)
