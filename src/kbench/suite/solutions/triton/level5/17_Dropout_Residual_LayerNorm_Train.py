"""Dropout + residual add + LayerNorm, forward and backward, in three Triton kernels.

Forward, a program per tile of whole rows: x, residual and u are read once; the dropout mask (u >= p), the
scaled add, each row's mean and variance (two-pass, in registers) and the affine normalization happen on
chip, and y, the pre-norm sum h, a 1-byte keep mask and each row's mean and 1/std are written. Eager runs
the compare, the cast, mul, div, add and layer_norm as separate kernels, each a pass over memory with its own
temporary.
Backward, a program per block of rows: dy, h and the mask are read once; with xhat = (h - mean) rstd and
g = dy w, dh = rstd (g - mean(g) - xhat mean(g xhat)) is written as the residual's gradient and, masked and
scaled by 1/(1 - p), as x's gradient in the same pass; the weight and bias gradients (column sums of dy xhat
and dy) accumulate in registers over the program's rows and are written as one row of per-program
partials, which a second small kernel sums in a fixed order (deterministic, no atomics). Eager's
layer_norm backward plus the dropout's mul/div chain make several more passes.
Rows of up to 16384 floats stay in registers, several short rows to a tile so that each holds at least 8192
elements; longer rows loop over chunks (re-reading h from memory)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK = 16384  # widest row kept in registers
TILE = 8192  # elements a tile holds at least: short rows are grouped
ROWS_PER_PROGRAM = 32  # backward: rows a program reduces into its row of weight/bias partials (at least)
MERGE_BLOCK = 256  # columns a merge program sums


@triton.jit
def dropout_residual_ln_forward_kernel(
    x_ptr, r_ptr, u_ptr, w_ptr, b_ptr, y_ptr, h_ptr, keep_ptr, mean_ptr, rstd_ptr, M, D, p, scale, eps,
    BLOCK_R: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    row_ok = rows < M
    base = rows.to(tl.int64)[:, None] * D
    cols = tl.arange(0, BLOCK)[None, :]
    if SINGLE:
        mask = row_ok[:, None] & (cols < D)
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        r = tl.load(r_ptr + base + cols, mask=mask, other=0.0)
        u = tl.load(u_ptr + base + cols, mask=mask, other=0.0)
        keep = u >= p
        h = r + tl.where(keep, x * scale, 0.0)
        mean = tl.sum(h, axis=1) / D
        diff = tl.where(mask, h - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=1) / D + eps)
        w = tl.load(w_ptr + cols, mask=cols < D, other=0.0)
        b = tl.load(b_ptr + cols, mask=cols < D, other=0.0)
        tl.store(y_ptr + base + cols, diff * rstd[:, None] * w + b, mask=mask)
        tl.store(h_ptr + base + cols, h, mask=mask)
        tl.store(keep_ptr + base + cols, keep.to(tl.int8), mask=mask)
    else:
        acc = tl.zeros([BLOCK_R, BLOCK], dtype=tl.float32)
        for c0 in range(0, D, BLOCK):
            mask = row_ok[:, None] & (c0 + cols < D)
            x = tl.load(x_ptr + base + c0 + cols, mask=mask, other=0.0)
            r = tl.load(r_ptr + base + c0 + cols, mask=mask, other=0.0)
            u = tl.load(u_ptr + base + c0 + cols, mask=mask, other=0.0)
            keep = u >= p
            h = r + tl.where(keep, x * scale, 0.0)
            acc += h
            tl.store(h_ptr + base + c0 + cols, h, mask=mask)
            tl.store(keep_ptr + base + c0 + cols, keep.to(tl.int8), mask=mask)
        mean = tl.sum(acc, axis=1) / D
        acc = tl.zeros([BLOCK_R, BLOCK], dtype=tl.float32)
        for c0 in range(0, D, BLOCK):
            mask = row_ok[:, None] & (c0 + cols < D)
            diff = tl.where(mask, tl.load(h_ptr + base + c0 + cols, mask=mask, other=0.0) - mean[:, None], 0.0)
            acc += diff * diff
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / D + eps)
        for c0 in range(0, D, BLOCK):
            mask = row_ok[:, None] & (c0 + cols < D)
            h = tl.load(h_ptr + base + c0 + cols, mask=mask, other=0.0)
            w = tl.load(w_ptr + c0 + cols, mask=c0 + cols < D, other=0.0)
            b = tl.load(b_ptr + c0 + cols, mask=c0 + cols < D, other=0.0)
            tl.store(y_ptr + base + c0 + cols, (h - mean[:, None]) * rstd[:, None] * w + b, mask=mask)
    tl.store(mean_ptr + rows, mean, mask=row_ok)
    tl.store(rstd_ptr + rows, rstd, mask=row_ok)


@triton.jit
def dropout_residual_ln_backward_kernel(
    dy_ptr, h_ptr, keep_ptr, mean_ptr, rstd_ptr, w_ptr, dx_ptr, dr_ptr, dw_part_ptr, db_part_ptr, M, D, scale,
    ROWS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK: tl.constexpr, SINGLE: tl.constexpr,
):
    """Rows [pid ROWS, (pid + 1) ROWS), BLOCK_R at a time; row pid of the partials gets their dw and db."""
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK)[None, :]
    part = pid.to(tl.int64) * D
    first = pid * ROWS
    if SINGLE:
        cmask = cols < D
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0)
        dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK], dtype=tl.float32)
        for r0 in range(0, ROWS, BLOCK_R):
            rows = first + r0 + tl.arange(0, BLOCK_R)
            row_ok = rows < M
            base = rows.to(tl.int64)[:, None] * D
            mask = row_ok[:, None] & cmask
            mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)[:, None]
            rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)[:, None]
            dy = tl.load(dy_ptr + base + cols, mask=mask, other=0.0)
            h = tl.load(h_ptr + base + cols, mask=mask, other=0.0)
            keep = tl.load(keep_ptr + base + cols, mask=mask, other=0)
            xhat = tl.where(mask, (h - mean) * rstd, 0.0)
            g = dy * w
            c1 = tl.sum(g * xhat, axis=1)[:, None] / D
            c2 = tl.sum(g, axis=1)[:, None] / D
            dh = (g - xhat * c1 - c2) * rstd
            tl.store(dr_ptr + base + cols, dh, mask=mask)
            tl.store(dx_ptr + base + cols, tl.where(keep != 0, dh * scale, 0.0), mask=mask)
            dw_acc += tl.sum(dy * xhat, axis=0)
            db_acc += tl.sum(dy, axis=0)
        tl.store(dw_part_ptr + part + tl.arange(0, BLOCK), dw_acc, mask=tl.arange(0, BLOCK) < D)
        tl.store(db_part_ptr + part + tl.arange(0, BLOCK), db_acc, mask=tl.arange(0, BLOCK) < D)
    else:
        # the partial rows start as zeros; this program alone updates its row, chunk by chunk
        for r0 in range(0, ROWS, BLOCK_R):
            rows = first + r0 + tl.arange(0, BLOCK_R)
            row_ok = rows < M
            base = rows.to(tl.int64)[:, None] * D
            mean = tl.load(mean_ptr + rows, mask=row_ok, other=0.0)[:, None]
            rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0.0)[:, None]
            s1 = tl.zeros([BLOCK_R, BLOCK], dtype=tl.float32)
            s2 = tl.zeros([BLOCK_R, BLOCK], dtype=tl.float32)
            for c0 in range(0, D, BLOCK):
                mask = row_ok[:, None] & (c0 + cols < D)
                dy = tl.load(dy_ptr + base + c0 + cols, mask=mask, other=0.0)
                h = tl.load(h_ptr + base + c0 + cols, mask=mask, other=0.0)
                w = tl.load(w_ptr + c0 + cols, mask=c0 + cols < D, other=0.0)
                xhat = tl.where(mask, (h - mean) * rstd, 0.0)
                g = dy * w
                s1 += g * xhat
                s2 += g
            c1 = tl.sum(s1, axis=1)[:, None] / D
            c2 = tl.sum(s2, axis=1)[:, None] / D
            for c0 in range(0, D, BLOCK):
                mask = row_ok[:, None] & (c0 + cols < D)
                dy = tl.load(dy_ptr + base + c0 + cols, mask=mask, other=0.0)
                h = tl.load(h_ptr + base + c0 + cols, mask=mask, other=0.0)
                keep = tl.load(keep_ptr + base + c0 + cols, mask=mask, other=0)
                w = tl.load(w_ptr + c0 + cols, mask=c0 + cols < D, other=0.0)
                xhat = tl.where(mask, (h - mean) * rstd, 0.0)
                dh = (dy * w - xhat * c1 - c2) * rstd
                tl.store(dr_ptr + base + c0 + cols, dh, mask=mask)
                tl.store(dx_ptr + base + c0 + cols, tl.where(keep != 0, dh * scale, 0.0), mask=mask)
                pc = c0 + tl.arange(0, BLOCK)
                dw = tl.load(dw_part_ptr + part + pc, mask=pc < D, other=0.0)
                db = tl.load(db_part_ptr + part + pc, mask=pc < D, other=0.0)
                tl.store(dw_part_ptr + part + pc, dw + tl.sum(dy * xhat, axis=0), mask=pc < D)
                tl.store(db_part_ptr + part + pc, db + tl.sum(dy, axis=0), mask=pc < D)


@triton.jit
def merge_partials_kernel(dw_part_ptr, db_part_ptr, dw_ptr, db_ptr, parts, D, BLOCK: tl.constexpr):
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cmask = cols < D
    dw = tl.zeros([BLOCK], dtype=tl.float32)
    db = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, parts):
        dw += tl.load(dw_part_ptr + i * D + cols, mask=cmask, other=0.0)
        db += tl.load(db_part_ptr + i * D + cols, mask=cmask, other=0.0)
    tl.store(dw_ptr + cols, dw, mask=cmask)
    tl.store(db_ptr + cols, db, mask=cmask)


def _launch_shape(d: int) -> dict:
    block = min(triton.next_power_of_2(d), MAX_BLOCK)
    block_r = max(1, TILE // block)
    warps = min(16, max(4, block * block_r // 512))
    return {"BLOCK_R": block_r, "BLOCK": block, "SINGLE": d <= block, "num_warps": warps}


class DropoutResidualLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, u, weight, bias, p, eps):
        x, residual, u = x.contiguous(), residual.contiguous(), u.contiguous()
        d = x.shape[-1]
        rows = x.numel() // d
        y, h = torch.empty_like(x), torch.empty_like(x)
        keep = torch.empty(x.shape, device=x.device, dtype=torch.int8)
        mean = torch.empty(rows, device=x.device, dtype=torch.float32)
        rstd = torch.empty(rows, device=x.device, dtype=torch.float32)
        shape = _launch_shape(d)
        scale = 1.0 / (1.0 - p)
        dropout_residual_ln_forward_kernel[(triton.cdiv(rows, shape["BLOCK_R"]),)](
            x, residual, u, weight, bias, y, h, keep, mean, rstd, rows, d, p, scale, eps, **shape,
        )
        ctx.save_for_backward(h, keep, mean, rstd, weight)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx, dy):
        h, keep, mean, rstd, weight = ctx.saved_tensors
        dy = dy.contiguous()
        d = h.shape[-1]
        rows = h.numel() // d
        dx, dr = torch.empty_like(h), torch.empty_like(h)
        shape = _launch_shape(d)
        per_program = max(ROWS_PER_PROGRAM, shape["BLOCK_R"])  # a multiple of BLOCK_R (both powers of 2)
        parts = triton.cdiv(rows, per_program)
        dw_part = torch.zeros((parts, d), device=h.device, dtype=torch.float32)
        db_part = torch.zeros((parts, d), device=h.device, dtype=torch.float32)
        dropout_residual_ln_backward_kernel[(parts,)](
            dy, h, keep, mean, rstd, weight, dx, dr, dw_part, db_part, rows, d, ctx.scale,
            ROWS=per_program, **shape,
        )
        dw, db = torch.empty_like(weight), torch.empty_like(weight)
        merge_partials_kernel[(triton.cdiv(d, MERGE_BLOCK),)](
            dw_part, db_part, dw, db, parts, d, BLOCK=MERGE_BLOCK, num_warps=4
        )
        return dx, dr, None, dw, db, None, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, p: float, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.p = p
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return DropoutResidualLayerNorm.apply(
            x, residual, u, self.weight.contiguous(), self.bias.contiguous(), self.p, self.eps
        )
