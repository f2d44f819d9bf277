"""SwiGLU feed-forward (no biases), forward and backward, all five GEMMs as Triton tl.dot kernels on
3xTF32 tensor cores (input_precision="tf32x3": fp32-level accuracy) with the gating in their epilogues.

Forward, two kernels:
- gate and up projections in one GEMM kernel: each program loads a tile of x once per K step and feeds it
  to two accumulators (x @ W_gate^T and x @ W_up^T); the epilogue writes g, u (saved) and h = silu(g) * u.
  Eager runs two GEMMs, then silu and the multiply as two more full passes.
- y = h @ W_down^T.
Backward, four kernels:
- dh = dy @ W_down with the SwiGLU backward in its epilogue: dg = dh * u * s * (1 + g * (1 - s)) and
  du = dh * silu(g) (s = sigmoid(g)) are written side by side into one [tokens, 2 * hidden] buffer; dh
  itself never reaches memory. Eager writes dh, then runs the silu and multiply backward kernels over it.
- dx = dg @ W_gate + du @ W_up as one kernel accumulating both products in the same registers (eager:
  two GEMMs and an add).
- [dW_gate; dW_up] = [dg, du]^T @ x as one GEMM over the side-by-side buffer; the two gradients are views
  of its halves.
- dW_down = dy^T @ h.
Every GEMM but the first is one strided kernel (operands of any layout, read through their strides).
Tiles past the edges compute on clamped in-bounds rows/columns and their stores are masked, so the K loop
needs no row masks. The tile shape keeps BM * BN * BK = 2^18: under the CPU interpreter each tl.dot is
one numpy matmul, which stays on one BLAS thread at that size.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BM, BN, BK = 128, 64, 32
NUM_WARPS, NUM_STAGES = 4, 3


@triton.jit
def gate_up_kernel(
    x_ptr, wg_ptr, wu_ptr, g_ptr, u_ptr, h_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr,
):
    # g = x @ Wg^T, u = x @ Wu^T (x [M, K], W [N, K]: all K-contiguous), h = silu(g) * u
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    px = x_ptr + (rm % M)[:, None] * K + rk[None, :]
    w_off = (rn % N)[None, :] * K + rk[:, None]
    pg = wg_ptr + w_off
    pu = wu_ptr + w_off
    acc_g = tl.zeros((BM, BN), dtype=tl.float32)
    acc_u = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            a = tl.load(px)
            bg = tl.load(pg)
            bu = tl.load(pu)
        else:
            a = tl.load(px, mask=rk[None, :] < K - k0, other=0.0)
            bg = tl.load(pg, mask=rk[:, None] < K - k0, other=0.0)
            bu = tl.load(pu, mask=rk[:, None] < K - k0, other=0.0)
        acc_g = tl.dot(a, bg, acc_g, input_precision="tf32x3")
        acc_u = tl.dot(a, bu, acc_u, input_precision="tf32x3")
        px += BK
        pg += BK
        pu += BK
    h = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    off = rm[:, None] * N + rn[None, :]
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(g_ptr + off, acc_g, mask=mask)
    tl.store(u_ptr + off, acc_u, mask=mask)
    tl.store(h_ptr + off, h, mask=mask)


@triton.jit
def mm_kernel(
    a_ptr, b_ptr, a2_ptr, b2_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr, TWO: tl.constexpr,
):
    # C [M, N] (contiguous) = A @ B (+ A2 @ B2, same shapes and strides): A[m, k] at a_ptr + m * sam +
    # k * sak, B[k, n] at b_ptr + k * sbk + n * sbn
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK).to(tl.int64)
    a_off = (rm % M)[:, None] * sam + rk[None, :] * sak
    b_off = rk[:, None] * sbk + (rn % N)[None, :] * sbn
    pa, pb = a_ptr + a_off, b_ptr + b_off
    pa2, pb2 = a2_ptr + a_off, b2_ptr + b_off
    step_a, step_b = BK * sak, BK * sbk
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            acc = tl.dot(tl.load(pa), tl.load(pb), acc, input_precision="tf32x3")
            if TWO:
                acc = tl.dot(tl.load(pa2), tl.load(pb2), acc, input_precision="tf32x3")
        else:
            ka, kb = rk[None, :] < K - k0, rk[:, None] < K - k0
            a = tl.load(pa, mask=ka, other=0.0)
            acc = tl.dot(a, tl.load(pb, mask=kb, other=0.0), acc, input_precision="tf32x3")
            if TWO:
                a2 = tl.load(pa2, mask=ka, other=0.0)
                acc = tl.dot(a2, tl.load(pb2, mask=kb, other=0.0), acc, input_precision="tf32x3")
        pa += step_a
        pb += step_b
        if TWO:
            pa2 += step_a
            pb2 += step_b
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=mask)


@triton.jit
def down_grad_kernel(
    dy_ptr, wd_ptr, g_ptr, u_ptr, dgu_ptr, M, N, K,
    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, EVEN_K: tl.constexpr,
):
    # dh = dy @ Wd (dy [M, K], Wd [K, N]); dg -> dgu[:, :N], du -> dgu[:, N:]
    rm = tl.program_id(0).to(tl.int64) * BM + tl.arange(0, BM)
    rn = tl.program_id(1).to(tl.int64) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK).to(tl.int64)
    pa = dy_ptr + (rm % M)[:, None] * K + rk[None, :]
    pb = wd_ptr + rk[:, None] * N + (rn % N)[None, :]
    step_b = BK * N
    dh = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if EVEN_K:
            dh = tl.dot(tl.load(pa), tl.load(pb), dh, input_precision="tf32x3")
        else:
            a = tl.load(pa, mask=rk[None, :] < K - k0, other=0.0)
            dh = tl.dot(a, tl.load(pb, mask=rk[:, None] < K - k0, other=0.0), dh, input_precision="tf32x3")
        pa += BK
        pb += step_b
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    off = rm[:, None] * N + rn[None, :]
    g = tl.load(g_ptr + off, mask=mask, other=0.0)
    u = tl.load(u_ptr + off, mask=mask, other=0.0)
    s = 1.0 / (1.0 + tl.exp(-g))
    dg = dh * u * s * (1.0 + g * (1.0 - s))
    du = dh * g * s
    out = dgu_ptr + rm[:, None] * (2 * N) + rn[None, :]
    tl.store(out, dg, mask=mask)
    tl.store(out + N, du, mask=mask)


def _grid(m, n, bn=BN):
    return (triton.cdiv(m, BM), triton.cdiv(n, bn))


def _mm(a, b, m, n, k, sam, sak, sbk, sbn, a2=None, b2=None):
    c = torch.empty((m, n), device=a.device, dtype=torch.float32)
    two = a2 is not None
    mm_kernel[_grid(m, n)](
        a, b, a2 if two else a, b2 if two else b, c, m, n, k, sam, sak, sbk, sbn,
        BM=BM, BN=BN, BK=BK, EVEN_K=k % BK == 0, TWO=two, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
    )
    return c


class SwiGLUMLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, wg, wu, wd):
        shape = x.shape
        x = x.reshape(-1, shape[-1]).contiguous()
        wg, wu, wd = wg.contiguous(), wu.contiguous(), wd.contiguous()
        m, d = x.shape
        hid = wg.shape[0]
        g = torch.empty((m, hid), device=x.device, dtype=torch.float32)
        u, h = torch.empty_like(g), torch.empty_like(g)
        # two accumulators per program: half the columns of a tile
        gate_up_kernel[_grid(m, hid, BN // 2)](
            x, wg, wu, g, u, h, m, hid, d,
            BM=BM, BN=BN // 2, BK=BK, EVEN_K=d % BK == 0, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
        )
        # y = h @ Wd^T: A = h [m, hid], B[k, n] = Wd[n, k]
        y = _mm(h, wd, m, d, hid, hid, 1, 1, hid)
        ctx.save_for_backward(x, wg, wu, wd, g, u, h)
        ctx.shape = shape
        return y.reshape(*shape[:-1], d)

    @staticmethod
    def backward(ctx, dy):
        x, wg, wu, wd, g, u, h = ctx.saved_tensors
        m, d = x.shape
        hid = wg.shape[0]
        dy = dy.reshape(m, d).contiguous()
        dgu = torch.empty((m, 2 * hid), device=x.device, dtype=torch.float32)
        down_grad_kernel[_grid(m, hid)](
            dy, wd, g, u, dgu, m, hid, d,
            BM=BM, BN=BN, BK=BK, EVEN_K=d % BK == 0, num_warps=NUM_WARPS, num_stages=NUM_STAGES,
        )
        # dx = dg @ Wg + du @ Wu: A = dgu halves (row stride 2 * hid), B[k, n] = W[k, n]
        dx = _mm(dgu, wg, m, d, hid, 2 * hid, 1, d, 1, a2=dgu[:, hid:], b2=wu)
        # [dWg; dWu] = dgu^T @ x: A[i, t] = dgu[t, i], B[t, n] = x[t, n]
        dw_gu = _mm(dgu, x, 2 * hid, d, m, 1, 2 * hid, d, 1)
        # dWd = dy^T @ h: A[i, t] = dy[t, i], B[t, n] = h[t, n]
        dwd = _mm(dy, h, d, hid, m, 1, d, hid, 1)
        return dx.reshape(ctx.shape), dw_gu[:hid], dw_gu[hid:], dwd


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return SwiGLUMLP.apply(x, self.gate.weight, self.up.weight, self.down.weight)
