"""Conv2d + tanh + scale + bias + MaxPool2d as one Triton implicit GEMM with the chain and the pooling in its
epilogue: each program's 128 GEMM rows are whole pooling windows -- P conv rows x (BQ * P) conv columns, BQ
= 128 / P^2 = 32 pooled outputs of one pooled row at the full size (P = 2) -- so the epilogue applies
tanh(y + b_c) * scale + bias_c to every element (a negative scale stays correct), reshapes the tile to
[P, BQ, P, BN] and takes the window maximum in registers; only the pooled tile is written. At the full size
only the 67 MB pooled result reaches memory; eager writes the 268 MB conv output and runs tanh, mul, add (a
read and a write each) and max_pool2d (a read) over it.

The GEMM: rows are the conv pixels of the program's windows, ordered (window row, pooled column, window
column) so that for each window row consecutive rows are consecutive conv pixels of one row; columns are the
output channels (BN = min(128, next_pow2(Cout)) = 64 at the full size); the reduction walks K = KH*KW*Cin as
one block of BK = 32 input channels at one kernel tap per step (no per-element div/mod in the k loop). The A
tile is gathered from the NCHW input as [BK, BM], lanes on the pixels (coalesced), zero padding by masks; the
weight is permuted once per call to [Cout, KH, KW, Cin] so each B tile is K-contiguous; both are transposed
in registers for the dot. The pooled tile is stored as [BN, BQ], lanes on the pooled pixels. A pool size that
is not a power of two is padded to the next one (the padding rows are masked to -inf).

The products (77 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32), which keeps fp32-level accuracy -- the 1e-4 tolerance holds with a wide margin -- where
cuDNN with TF32 off runs on the fp32 SIMT units. tanh uses the one-exp form that cannot overflow.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
6.6e-7."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps, 3 stages, as the Conv2d + ReLU template (11)
BM, BK = 128, 32


@triton.jit
def conv_tile(x_ptr, w_ptr, x_off, oh, ow, mmask, co, cmask, c_in, height, width,
              stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
              KH: tl.constexpr, KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] tile of the bias-free convolution for output pixels (oh, ow) of the input planes starting
    at x_off and output channels co: x is NCHW, w is [Cout, KH, KW, Cin]; one step is BK input channels at one
    tap (kh, kw), so the k loop has no per-element div/mod."""
    hw = height * width
    x_pix = x_ptr + x_off
    ck = tl.arange(0, BK)
    k_total = KH * KW * c_in
    blocks = tl.cdiv(c_in, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, KH * KW * blocks):
        tap = step // blocks
        ci = (step - tap * blocks) * BK + ck
        kh = tap // KW
        ih = oh * stride_h - pad_h + kh * dil_h
        iw = ow * stride_w - pad_w + (tap - kh * KW) * dil_w
        rmask = mmask & (ih >= 0) & (ih < height) & (iw >= 0) & (iw < width)
        kmask = ci < c_in
        # [BK, BM] and [BN, BK] loads: consecutive lanes read consecutive pixels / weights
        a = tl.load(x_pix[None, :] + (ci * hw)[:, None] + (ih * width + iw)[None, :],
                    mask=kmask[:, None] & rmask[None, :], other=0.0)
        b = tl.load(w_ptr + (co * k_total)[:, None] + (tap * c_in + ci)[None, :],
                    mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(tl.trans(a), tl.trans(b), acc, input_precision="tf32x3")
    return acc


@triton.jit
def _tanh(x):
    # tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)): one exp, no overflow for large |x|
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, r, -r)


@triton.jit
def conv_tanh_pool_kernel(
    x_ptr, w_ptr, cb_ptr, b_ptr, out_ptr, c_in, height, width, c_out, pool_h, pool_w, pool, scale,
    stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
    KH: tl.constexpr, KW: tl.constexpr, PP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    BK: tl.constexpr,
):
    # program (pooled row x pooled column tile, channel tile, sample); PP = next_pow2(pool), BQ pooled columns
    BQ: tl.constexpr = BM // (PP * PP)
    n = tl.program_id(2)
    q_tiles = tl.cdiv(pool_w, BQ)
    qh = tl.program_id(0) // q_tiles
    q0 = (tl.program_id(0) - qh * q_tiles) * BQ
    # row m = (i * BQ + jq) * PP + j: window offset (i, j) of pooled column q0 + jq
    m = tl.arange(0, BM)
    i = m // (BQ * PP)
    jq = (m // PP) % BQ
    j = m % PP
    mmask = (i < pool) & (j < pool) & (q0 + jq < pool_w)
    co = tl.program_id(1) * BN + tl.arange(0, BN)
    cmask = co < c_out
    x_off = tl.zeros((BM,), dtype=tl.int64) + n.to(tl.int64) * c_in * height * width
    acc = conv_tile(x_ptr, w_ptr, x_off, qh * pool + i, (q0 + jq) * pool + j, mmask, co, cmask, c_in, height,
                    width, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, KH, KW, BM, BN, BK)
    cb = tl.load(cb_ptr + co, mask=cmask, other=0.0)[None, :]
    bias = tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    v = tl.where(mmask[:, None], _tanh(acc + cb) * scale + bias, float("-inf"))
    best = tl.max(tl.max(tl.reshape(v, (PP, BQ, PP, BN)), axis=2), axis=0)
    q = q0 + tl.arange(0, BQ)
    # stored as [BN, BQ] so consecutive lanes write consecutive pooled pixels of one channel plane
    dst = out_ptr + ((n * c_out + co).to(tl.int64) * pool_h + qh) * pool_w
    tl.store(dst[:, None] + q[None, :], tl.trans(best), mask=cmask[:, None] & (q < pool_w)[None, :])


def conv_geometry(conv, x):
    """The permuted [Cout, KH, KW, Cin] weight and the launch scalars shared by every conv kernel here."""
    c_out, c_in, kh, kw = conv.weight.shape
    w = conv.weight.permute(0, 2, 3, 1).contiguous()
    _, _, h, wd = x.shape
    (sh, sw), (ph, pw), (dh, dw) = conv.stride, conv.padding, conv.dilation
    out_h = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    out_w = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    return w, (kh, kw), (out_h, out_w), (sh, sw, ph, pw, dh, dw)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        scale: float,
        bias_shape: tuple[int, ...],
        pool_size: int,
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c_in, h, wd = x.shape
        c_out = self.conv.out_channels
        w, (kh, kw), (out_h, out_w), geo = conv_geometry(self.conv, x)
        pool = self.pool_size
        pool_h, pool_w = out_h // pool, out_w // pool  # max_pool2d: stride = window, no padding, floor
        out = torch.empty((n, c_out, pool_h, pool_w), device=x.device, dtype=x.dtype)
        pp = triton.next_power_of_2(pool)
        bn = min(128, max(16, triton.next_power_of_2(c_out)))
        bk = min(BK, max(16, triton.next_power_of_2(c_in)))
        grid = (pool_h * triton.cdiv(pool_w, BM // (pp * pp)), triton.cdiv(c_out, bn), n)
        conv_tanh_pool_kernel[grid](
            x, w, self.conv.bias, self.bias.reshape(-1).contiguous(), out, c_in, h, wd, c_out, pool_h, pool_w, pool,
            self.scale, *geo, KH=kh, KW=kw, PP=pp, BM=BM, BN=bn, BK=bk, num_warps=8, num_stages=3,
        )
        return out
