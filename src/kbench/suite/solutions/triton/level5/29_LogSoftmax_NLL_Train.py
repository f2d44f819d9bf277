"""Log-softmax + class-weighted NLL (mean over the weights), forward and backward, in Triton.

Forward: each row's logits are streamed once with an online max/sum (per-lane running maxima and
rescaled sums, merged at the end) for the row's log-sum-exp, and the target's logit and class weight are
picked out; no log-probability tensor is ever written (narrow rows are stacked several to a tile). Each row leaves w[t] * (lse - x[t]) and w[t],
and a second small kernel sums them over the rows in a fixed order (deterministic) and divides. Eager
writes the full log_softmax output (as large as the logits) and reads it back for nll_loss.

Backward: one pass reads the logits once more and writes
dlogits = g * w[t] / sum(w[t]) * (exp(x - lse) - onehot(t)) from the saved per-row log-sum-exp; eager's
autograd materializes the NLL gradient as a full-size scatter and then runs the log_softmax backward
kernel over it and the saved log-probabilities."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_BLOCK_C = 4096  # columns per vector step (forward) and per tile (backward); fewer for narrow rows
TILE = 4096  # elements per [rows x columns] tile: narrow rows are stacked BLOCK_R to a tile
MERGE_BLOCK = 1024
IGNORE_INDEX = -100  # F.nll_loss's default: such a row counts neither in the sum nor the weight total


@triton.jit
def lse_nll_rows_kernel(
    x_ptr, t_ptr, cw_ptr, lse_ptr, num_ptr, den_ptr, rows, n_cols, ignore_index,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    base = x_ptr + r.to(tl.int64)[:, None] * n_cols
    # per-lane running max and rescaled sum; finite start: lanes that never see a column stay exact
    m = tl.full([BLOCK_R, BLOCK_C], -1.0e30, dtype=tl.float32)
    s = tl.zeros([BLOCK_R, BLOCK_C], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_C):
        cols = start + tl.arange(0, BLOCK_C)[None, :]
        x = tl.load(base + cols, mask=rmask[:, None] & (cols < n_cols), other=-float("inf"))
        m_new = tl.maximum(m, x)
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        m = m_new
    row_max = tl.max(m, axis=1)
    lse = row_max + tl.log(tl.sum(s * tl.exp(m - row_max[:, None]), axis=1))
    t = tl.load(t_ptr + r, mask=rmask, other=0)
    valid = rmask & (t != ignore_index)
    t_safe = tl.where(valid, t, 0)
    w = tl.load(cw_ptr + t_safe, mask=valid, other=0.0)
    x_t = tl.load(x_ptr + r.to(tl.int64) * n_cols + t_safe, mask=valid, other=0.0)
    tl.store(lse_ptr + r, lse, mask=rmask)
    tl.store(num_ptr + r, tl.where(valid, w * (lse - x_t), 0.0), mask=rmask)
    tl.store(den_ptr + r, w, mask=rmask)


@triton.jit
def nll_merge_kernel(num_ptr, den_ptr, loss_ptr, total_ptr, rows, BLOCK: tl.constexpr):
    num = tl.zeros([BLOCK], dtype=tl.float32)
    den = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, rows, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        num += tl.load(num_ptr + offs, mask=offs < rows, other=0.0)
        den += tl.load(den_ptr + offs, mask=offs < rows, other=0.0)
    total = tl.sum(den, axis=0)
    tl.store(loss_ptr, tl.sum(num, axis=0) / total)
    tl.store(total_ptr, total)


@triton.jit
def nll_backward_kernel(
    x_ptr, t_ptr, cw_ptr, lse_ptr, total_ptr, gout_ptr, dx_ptr, rows, n_cols, ignore_index,
    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    rmask = r < rows
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = rmask[:, None] & (cols < n_cols)
    t = tl.load(t_ptr + r, mask=rmask, other=0)
    valid = rmask & (t != ignore_index)
    w = tl.load(cw_ptr + tl.where(valid, t, 0), mask=valid, other=0.0)
    coef = (tl.load(gout_ptr) / tl.load(total_ptr) * w)[:, None]
    lse = tl.load(lse_ptr + r, mask=rmask, other=0.0)[:, None]
    offs = r.to(tl.int64)[:, None] * n_cols + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    p = tl.exp(x - lse)
    tl.store(dx_ptr + offs, coef * (p - (cols == t[:, None]).to(tl.float32)), mask=mask)


def _tiles(rows, n_cols):
    """(BLOCK_R, BLOCK_C): column chunks of up to MAX_BLOCK_C, narrow rows stacked into TILE-element tiles."""
    block_c = min(MAX_BLOCK_C, triton.next_power_of_2(n_cols))
    return min(max(1, TILE // block_c), triton.next_power_of_2(rows)), block_c


class LogSoftmaxNLL(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, targets, class_weights):
        logits, targets, class_weights = logits.contiguous(), targets.contiguous(), class_weights.contiguous()
        rows, n_cols = logits.shape
        dev = logits.device
        block_r, block_c = _tiles(rows, n_cols)
        lse = torch.empty(rows, device=dev, dtype=torch.float32)
        num = torch.empty(rows, device=dev, dtype=torch.float32)
        den = torch.empty(rows, device=dev, dtype=torch.float32)
        lse_nll_rows_kernel[(triton.cdiv(rows, block_r),)](
            logits, targets, class_weights, lse, num, den, rows, n_cols, IGNORE_INDEX,
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=8,
        )
        loss = torch.empty((), device=dev, dtype=torch.float32)
        total = torch.empty(1, device=dev, dtype=torch.float32)
        nll_merge_kernel[(1,)](num, den, loss, total, rows, BLOCK=MERGE_BLOCK)
        ctx.save_for_backward(logits, targets, class_weights, lse, total)
        return loss

    @staticmethod
    def backward(ctx, gout):
        logits, targets, class_weights, lse, total = ctx.saved_tensors
        gout = gout.contiguous()
        rows, n_cols = logits.shape
        block_r, block_c = _tiles(rows, n_cols)
        dx = torch.empty_like(logits)
        nll_backward_kernel[(triton.cdiv(rows, block_r), triton.cdiv(n_cols, block_c))](
            logits, targets, class_weights, lse, total, gout, dx, rows, n_cols, IGNORE_INDEX,
            BLOCK_R=block_r, BLOCK_C=block_c, num_warps=8,
        )
        return dx, None, None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor
    ) -> torch.Tensor:
        return LogSoftmaxNLL.apply(logits, targets, class_weights)
