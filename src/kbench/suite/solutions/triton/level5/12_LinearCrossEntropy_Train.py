"""A language-model head with its mean cross-entropy, forward and backward, the three GEMMs as Triton
tl.dot kernels on 3xTF32 tensor cores (input_precision="tf32x3": fp32-level accuracy).

Forward:
- logits = hidden @ W^T as a GEMM (both operands K-contiguous) whose epilogue also reduces each
  [BM x BN] tile to a per-row partial max and sum of exponentials over its vocabulary columns, so the
  logsumexp needs no further pass over the logits. The logits are kept for the backward (as eager
  keeps them): recomputing them there would cost a second GEMM of the same size, far more than one write
  and one read of the logits.
- a row kernel merges the partials into each row's logsumexp (saved) and loss (logsumexp minus the
  target's logit, one scalar load; 0 for ignore_index), and a one-program kernel sums the rows in a fixed
  order (deterministic) into the mean.
Backward:
- one elementwise kernel writes dlogits = (exp(logits - lse) - onehot(target)) * dloss / count in a single
  read and write, where eager's nll_loss and log_softmax backward kernels write a one-hot gradient and read
  it back with the saved log-probabilities.
- dhidden = dlogits @ W and dW = dlogits^T @ hidden as two launches of one strided GEMM kernel (operands
  of any layout, read through their strides).
Tiles past the edges compute on clamped in-bounds rows/columns (no row masks in the K loop); their stores
are masked and the partial reductions ignore their columns. The tile shape keeps BM * BN * BK = 2^18:
under the CPU interpreter each tl.dot is one numpy matmul, which stays on one BLAS thread at that size.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 64, 32
NUM_WARPS, NUM_STAGES = 4, 3
IGNORE_INDEX = -100
MAX_PARTS = 1024  # per-tile partials per row merged at a time
BLOCK_ROWS = 1024
EW_BLOCK = 4096  # vocabulary columns per tile of the dlogits kernel
TILE = 8192  # floats per [ROWS, BLOCK] tile of the row kernels


@triton.jit
def logits_kernel(
    h_ptr, w_ptr, logits_ptr, pmax_ptr, psum_ptr, M, N, K, parts,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr,
):
    # logits = hidden @ W^T (hidden [M, K], W [N, K]: both K-contiguous); this column tile's partial row
    # max and sum of exponentials
    pid_n = tl.program_id(1)
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = pid_n.to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # rows/columns past the edge compute on in-bounds ones (no masks in the K loop); stores drop them
    pa = h_ptr + (rm % M)[:, None] * K + rk[None, :]
    pb = w_ptr + (rn % N)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            acc = tl.dot(tl.load(pa), tl.load(pb), acc, input_precision="tf32x3")
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            acc = tl.dot(a, tl.load(pb, mask=rk[:, None] < K - k0, other=0.0), acc, input_precision="tf32x3")
        pa += BK
        pb += BK
    row_ok = rm < M
    col_ok = (rn < N)[None, :]
    tl.store(logits_ptr + rm[:, None] * N + rn[None, :], acc, mask=row_ok[:, None] & col_ok)
    z = tl.where(col_ok, acc, -float("inf"))
    tmax = tl.max(z, axis=1)
    tsum = tl.sum(tl.exp(z - tmax[:, None]), axis=1)
    tl.store(pmax_ptr + rm * parts + pid_n, tmax, mask=row_ok)
    tl.store(psum_ptr + rm * parts + pid_n, tsum, mask=row_ok)


@triton.jit
def rows_kernel(
    logits_ptr, t_ptr, pmax_ptr, psum_ptr, lse_ptr, loss_ptr, valid_ptr, n_rows, n_cols, parts, ignore_index,
    ROWS: tl.constexpr, BLOCK: tl.constexpr,
):
    # merge each row's per-tile (max, sum of exp) partials into its logsumexp; the row's loss
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = rows < n_rows
    rows = rows % n_rows  # rows past the end reread a valid one; their stores are masked
    base = rows.to(tl.int64)[:, None] * parts
    offs = tl.arange(0, BLOCK)[None, :]
    m = tl.full([ROWS], -float("inf"), tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    for p0 in range(0, parts, BLOCK):
        mask = p0 + offs < parts
        pm = tl.load(pmax_ptr + base + p0 + offs, mask=mask, other=-float("inf"))
        ps = tl.load(psum_ptr + base + p0 + offs, mask=mask, other=0.0)
        m_new = tl.maximum(m, tl.max(pm, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(ps * tl.exp(pm - m_new[:, None]), axis=1)
        m = m_new
    lse = m + tl.log(s)
    t = tl.load(t_ptr + rows)
    valid = t != ignore_index
    x_t = tl.load(logits_ptr + rows.to(tl.int64) * n_cols + tl.where(valid, t, 0))
    tl.store(lse_ptr + rows, lse, mask=row_ok)
    tl.store(loss_ptr + rows, tl.where(valid, lse - x_t, 0.0), mask=row_ok)
    tl.store(valid_ptr + rows, tl.where(valid, 1.0, 0.0), mask=row_ok)


@triton.jit
def mean_kernel(loss_ptr, valid_ptr, out_ptr, count_ptr, n_rows, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    cnt = tl.zeros([BLOCK], tl.float32)
    for r0 in range(0, n_rows, BLOCK):
        mask = r0 + offs < n_rows
        acc += tl.load(loss_ptr + r0 + offs, mask=mask, other=0.0)
        cnt += tl.load(valid_ptr + r0 + offs, mask=mask, other=0.0)
    count = tl.sum(cnt, axis=0)
    tl.store(out_ptr, tl.sum(acc, axis=0) / count)
    tl.store(count_ptr, count)


@triton.jit
def dlogits_kernel(
    logits_ptr, t_ptr, lse_ptr, dloss_ptr, count_ptr, out_ptr, n_rows, n_cols, ignore_index,
    ROWS: tl.constexpr, BLOCK: tl.constexpr,
):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    row_ok = (rows < n_rows)[:, None]
    rows = rows % n_rows
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)[None, :]
    mask = row_ok & (cols < n_cols)
    t = tl.load(t_ptr + rows)[:, None]
    scale = tl.load(dloss_ptr) / tl.load(count_ptr)
    scale = tl.where(t != ignore_index, scale, 0.0)
    off = rows.to(tl.int64)[:, None] * n_cols + cols
    x = tl.load(logits_ptr + off, mask=mask, other=0.0)
    p = tl.exp(x - tl.load(lse_ptr + rows)[:, None])
    tl.store(out_ptr + off, (p - tl.where(cols == t, 1.0, 0.0)) * scale, mask=mask)


@triton.jit
def mm_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr,
):
    # C [M, N] (contiguous) = A @ B: A[m, k] at a_ptr + m * sam + k * sak, B[k, n] at b_ptr + k * sbk +
    # n * sbn
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK).to(tl.int64)
    pa = a_ptr + (rm % M)[:, None] * sam + rk[None, :] * sak
    pb = b_ptr + rk[:, None] * sbk + (rn % N)[None, :] * sbn
    step_a, step_b = BK * sak, BK * sbk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            acc = tl.dot(tl.load(pa), tl.load(pb), acc, input_precision="tf32x3")
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            acc = tl.dot(a, tl.load(pb, mask=rk[:, None] < K - k0, other=0.0), acc, input_precision="tf32x3")
        pa += step_a
        pb += step_b
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)


def _row_tiles(n_rows, n_cols, max_block):
    """(rows, columns) of a [ROWS, BLOCK] tile of TILE floats at most, for rows of n_cols."""
    block = min(triton.next_power_of_2(n_cols), max_block)
    return min(max(1, TILE // block), triton.next_power_of_2(n_rows)), block


def _mm(a, b, m, n, k, sam, sak, sbk, sbn):
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    mm_kernel[(triton.cdiv(m, BM), triton.cdiv(n, BN))](
        a, b, c, m, n, k, sam, sak, sbk, sbn,
        BM=BM, BN=BN, BK=BK, EVEN_K=k % BK == 0, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return c


class LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, hidden, weight, targets):
        hidden, weight, targets = hidden.contiguous(), weight.contiguous(), targets.contiguous()
        n_rows, dim = hidden.shape
        vocab = weight.shape[0]
        dev = hidden.device
        parts = triton.cdiv(vocab, BN)
        logits = torch.empty((n_rows, vocab), device=dev, dtype=torch.float32)
        pmax = torch.empty((n_rows, parts), device=dev, dtype=torch.float32)
        psum = torch.empty_like(pmax)
        logits_kernel[(triton.cdiv(n_rows, BM), parts)](
            hidden, weight, logits, pmax, psum, n_rows, vocab, dim, parts,
            BM=BM, BN=BN, BK=BK, EVEN_K=dim % BK == 0, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
        )
        lse = torch.empty(n_rows, device=dev, dtype=torch.float32)
        row_loss, valid = torch.empty_like(lse), torch.empty_like(lse)
        rows, block = _row_tiles(n_rows, parts, MAX_PARTS)
        rows_kernel[(triton.cdiv(n_rows, rows),)](
            logits, targets, pmax, psum, lse, row_loss, valid, n_rows, vocab, parts, IGNORE_INDEX,
            ROWS=rows, BLOCK=block, num_warps=4,
        )
        loss = torch.empty((), device=dev, dtype=torch.float32)
        count = torch.empty((), device=dev, dtype=torch.float32)
        mean_kernel[(1,)](row_loss, valid, loss, count, n_rows, BLOCK=BLOCK_ROWS, num_warps=4)
        ctx.save_for_backward(hidden, weight, targets, logits, lse, count)
        return loss

    @staticmethod
    def backward(ctx, dloss):
        hidden, weight, targets, logits, lse, count = ctx.saved_tensors
        dloss = dloss.contiguous()
        n_rows, dim = hidden.shape
        vocab = weight.shape[0]
        dlogits = torch.empty_like(logits)
        rows, block = _row_tiles(n_rows, vocab, EW_BLOCK)
        dlogits_kernel[(triton.cdiv(n_rows, rows), triton.cdiv(vocab, block))](
            logits, targets, lse, dloss, count, dlogits, n_rows, vocab, IGNORE_INDEX,
            ROWS=rows, BLOCK=block, num_warps=8,
        )
        # dhidden = dlogits @ W: A = dlogits [n_rows, vocab], B[k, n] = W[k, n]
        dhidden = _mm(dlogits, weight, n_rows, dim, vocab, vocab, 1, dim, 1)
        # dW = dlogits^T @ hidden: A[v, t] = dlogits[t, v], B[t, n] = hidden[t, n]
        dweight = _mm(dlogits, hidden, vocab, dim, n_rows, 1, vocab, dim, 1)
        return dhidden, dweight, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, dim) * dim**-0.5)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return LinearCrossEntropy.apply(hidden, self.weight, targets)
