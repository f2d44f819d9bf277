"""Linear + residual + LayerNorm, forward and backward, in Triton; all three GEMMs are Triton tl.dot on
3xTF32 tensor cores (input_precision="tf32x3": fp32-level accuracy), with K-contiguous operands and
grouped tiles (neighbouring programs share operand tiles in L2).

Forward: (1) h = x @ W^T with the linear's bias and the residual x added in the GEMM's epilogue (h written
once; eager writes addmm's output and then reads it back for the add); (2) whole rows, several to a tile, are kept
in registers for the LayerNorm's two-pass mean and variance; y is written and each row's mean and rstd
saved.

Backward: (1) each program walks a block of rows, whole rows in registers, and writes dh = LayerNorm
backward of dy, summing dy * xhat, dy and dh over its rows into per-program partials for the LayerNorm's weight
and bias and the linear's bias (merged by a second small kernel in a fixed order: deterministic) -- eager
runs the layer-norm backward, then a separate reduction for the linear's bias; (2) dx = dh @ W + dh as one
GEMM with the residual's gradient added in its epilogue; (3) dW = dh^T @ x as one GEMM. Both read their
operands K-contiguous: W^T, dh^T and x^T are written once by a tiled transpose kernel (memory passes
that are cheap next to the GEMMs' arithmetic)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 128, 64
GROUP_M = 8
T = 64  # transpose tile
TILE = 4096  # elements per LayerNorm tile: whole rows, stacked BLOCK_R to a tile
ROW_TILES = 8  # tiles one LayerNorm-backward program walks through (one partial row per program)


@triton.jit
def tile_ids(M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(row block, column block) of this program; GROUP_M row blocks share each band of B tiles in L2."""
    pid = tl.program_id(0)
    num_m = tl.cdiv(M, BM)
    per_group = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // per_group) * GROUP_M
    size_m = min(num_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % size_m, (pid % per_group) // size_m


@triton.jit
def gemm_kernel(
    a_ptr, b_ptr, bias_ptr, res_ptr, out_ptr, M, N, K,
    HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr, EVEN_K: tl.constexpr,
):
    """out[M, N] = A[M, K] @ B[N, K]^T (+ bias[N]) (+ res[M, N]); both operands K-contiguous."""
    pid_m, pid_n = tile_ids(M, N, BM, BN, GROUP_M)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    # rows/columns past the edge read row/column 0 (in bounds, no masks in the K loop); the store drops them
    pa = a_ptr + (rm % M).to(tl.int64)[:, None] * K + rk[None, :]
    pb = b_ptr + (rn % N).to(tl.int64)[None, :] * K + rk[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(pa)
            b = tl.load(pb)
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            b = tl.load(pb, mask=rk[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32x3")
        pa += BK
        pb += BK
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    offs = rm.to(tl.int64)[:, None] * N + rn[None, :]
    if HAS_BIAS:
        acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
    if HAS_RES:
        acc += tl.load(res_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)


@triton.jit
def transpose_kernel(src_ptr, dst_ptr, R, C, T: tl.constexpr):
    r = tl.program_id(0) * T + tl.arange(0, T)[:, None]
    c = tl.program_id(1) * T + tl.arange(0, T)[None, :]
    mask = (r < R) & (c < C)
    tile = tl.load(src_ptr + r.to(tl.int64) * C + c, mask=mask)
    tl.store(dst_ptr + c.to(tl.int64) * R + r, tile, mask=mask)


@triton.jit
def layernorm_fwd_kernel(
    h_ptr, g_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, M, N, eps, BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.arange(0, BLOCK_N)[None, :]
    rmask = r < M
    mask = rmask[:, None] & (cols < N)
    p = r.to(tl.int64)[:, None] * N + cols
    h = tl.load(h_ptr + p, mask=mask, other=0.0)
    mean = tl.sum(h, axis=1) / N
    dev = tl.where(mask, h - mean[:, None], 0.0)
    rstd = tl.rsqrt(tl.sum(dev * dev, axis=1) / N + eps)
    g = tl.load(g_ptr + cols, mask=cols < N, other=0.0)
    b = tl.load(b_ptr + cols, mask=cols < N, other=0.0)
    tl.store(y_ptr + p, dev * rstd[:, None] * g + b, mask=mask)
    tl.store(mean_ptr + r, mean, mask=rmask)
    tl.store(rstd_ptr + r, rstd, mask=rmask)


@triton.jit
def layernorm_bwd_kernel(
    dy_ptr, h_ptr, g_ptr, mean_ptr, rstd_ptr, dh_ptr, part_ptr, M, N, row_tiles,
    BLOCK_R: tl.constexpr, BLOCK_N: tl.constexpr,
):
    # dh for row_tiles tiles of BLOCK_R rows; this program's sums of dy * xhat, dy and dh go to its three
    # rows of partials
    cols1 = tl.arange(0, BLOCK_N)
    cols = cols1[None, :]
    g = tl.load(g_ptr + cols, mask=cols < N, other=0.0)
    acc_g = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc_b = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc_lb = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in range(row_tiles):
        r = (tl.program_id(0) * row_tiles + i) * BLOCK_R + tl.arange(0, BLOCK_R)
        rmask = r < M
        mask = rmask[:, None] & (cols < N)
        p = r.to(tl.int64)[:, None] * N + cols
        dy = tl.load(dy_ptr + p, mask=mask, other=0.0)
        h = tl.load(h_ptr + p, mask=mask, other=0.0)
        mean = tl.load(mean_ptr + r, mask=rmask, other=0.0)[:, None]
        rstd = tl.load(rstd_ptr + r, mask=rmask, other=0.0)[:, None]
        xhat = tl.where(mask, (h - mean) * rstd, 0.0)
        gdy = dy * g
        c1 = (tl.sum(gdy, axis=1) / N)[:, None]
        c2 = (tl.sum(gdy * xhat, axis=1) / N)[:, None]
        dh = tl.where(mask, rstd * (gdy - c1 - xhat * c2), 0.0)
        tl.store(dh_ptr + p, dh, mask=mask)
        acc_g += tl.sum(dy * xhat, axis=0)
        acc_b += tl.sum(dy, axis=0)
        acc_lb += tl.sum(dh, axis=0)
    prow = part_ptr + tl.program_id(0) * (3 * N)
    tl.store(prow + cols1, acc_g, mask=cols1 < N)
    tl.store(prow + N + cols1, acc_b, mask=cols1 < N)
    tl.store(prow + 2 * N + cols1, acc_lb, mask=cols1 < N)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, parts, width, stride, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for i in range(0, parts):
        acc += tl.load(part_ptr + i * stride + cols, mask=cols < width, other=0.0)
    tl.store(out_ptr + cols, acc, mask=cols < width)


def _gemm(a, b, bias=None, res=None):
    """a [M, K] @ b[N, K]^T (+ bias) (+ res), both K-contiguous."""
    m, k = a.shape
    n = b.shape[0]
    out = torch.empty((m, n), device=a.device, dtype=torch.float32)
    gemm_kernel[(triton.cdiv(m, BM) * triton.cdiv(n, BN),)](
        a, b, bias if bias is not None else out, res if res is not None else out, out, m, n, k,
        HAS_BIAS=bias is not None, HAS_RES=res is not None,
        BM=BM, BN=BN, BK=BK, GROUP_M=GROUP_M, EVEN_K=k % BK == 0, num_warps=8, num_stages=3,
    )
    return out


def _transpose(x):
    r, c = x.shape
    out = torch.empty((c, r), device=x.device, dtype=x.dtype)
    transpose_kernel[(triton.cdiv(r, T), triton.cdiv(c, T))](x, out, r, c, T=T)
    return out


def _row_tiles(m, n):
    """(BLOCK_R, BLOCK_N): whole rows, stacked BLOCK_R to a tile of TILE elements."""
    block_n = triton.next_power_of_2(n)
    return min(max(1, TILE // block_n), triton.next_power_of_2(m)), block_n


class LinearResidualLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, norm_weight, norm_bias, eps):
        shape = x.shape
        x2 = x.contiguous().view(-1, shape[-1])
        weight = weight.contiguous()
        m, n = x2.shape
        h = _gemm(x2, weight, bias=bias, res=x2)
        y = torch.empty_like(h)
        mean = torch.empty(m, device=x.device, dtype=torch.float32)
        rstd = torch.empty(m, device=x.device, dtype=torch.float32)
        block_r, block_n = _row_tiles(m, n)
        layernorm_fwd_kernel[(triton.cdiv(m, block_r),)](
            h, norm_weight, norm_bias, y, mean, rstd, m, n, eps, BLOCK_R=block_r, BLOCK_N=block_n, num_warps=8
        )
        ctx.save_for_backward(x2, weight, h, mean, rstd, norm_weight)
        ctx.shape = shape
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, h, mean, rstd, norm_weight = ctx.saved_tensors
        m, n = h.shape
        dy = dy.contiguous().view(m, n)
        block_r, block_n = _row_tiles(m, n)
        row_tiles = min(ROW_TILES, triton.cdiv(m, block_r))
        parts = triton.cdiv(m, block_r * row_tiles)
        dh = torch.empty_like(h)
        partial = torch.empty((parts, 3 * n), device=h.device, dtype=torch.float32)
        layernorm_bwd_kernel[(parts,)](
            dy, h, norm_weight, mean, rstd, dh, partial, m, n, row_tiles,
            BLOCK_R=block_r, BLOCK_N=block_n, num_warps=8,
        )
        grads = [torch.empty(n, device=h.device, dtype=torch.float32) for _ in range(3)]
        for i, out in enumerate(grads):  # the LayerNorm's weight and bias, the linear's bias
            column_sum_kernel[(triton.cdiv(n, 1024),)](partial[:, i * n :], out, parts, n, 3 * n, BLOCK_D=1024)
        dnorm_weight, dnorm_bias, dbias = grads
        # dx = dh @ W + dh (the residual), dW = dh^T @ x: operands transposed to be K-contiguous
        dx = _gemm(dh, _transpose(weight), res=dh)
        dweight = _gemm(_transpose(dh), _transpose(x2))
        return dx.view(ctx.shape), dweight, dbias, dnorm_weight, dnorm_bias, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.norm_bias = nn.Parameter(0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LinearResidualLayerNorm.apply(
            x, self.linear.weight, self.linear.bias, self.norm_weight, self.norm_bias, float(self.eps)
        )
