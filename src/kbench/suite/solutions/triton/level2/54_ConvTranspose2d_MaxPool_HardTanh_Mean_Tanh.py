"""ConvTranspose2d + MaxPool2d(2) + hardtanh + spatial mean + tanh, two Triton kernels:
1. the transposed convolution as an implicit GEMM whose rows are the pooled pixels of one sample: with stride
   2 the 2x2 pooling window of pooled pixel (i, j) is exactly the four parity classes (oh % 2, ow % 2) at (oh
   // 2, ow // 2) = (i, j), so a program runs the four classes one after the other on the same rows, keeps the
   window max, adds the bias after the max (a per-channel constant commutes with it), clamps to [-1, 1] and
   writes its tile's per-channel sum;
2. one program per sample adds up its tiles' sums and writes tanh(sum / pooled area).
Nothing of the 537 MB conv output is written; eager writes it, adds the bias (read + write), pools (read + a
134 MB write), clamps (read + write), then the mean and tanh.

The transposed convolution in gather form: out[n, co, oh, ow] = sum over ci, kh, kw of x[n, ci, ih, iw] *
w[ci, co, kh, kw] with ih = (oh + pad - kh) / 2 counted only where integral and in range. Within a parity
class only the taps kh = (oh % 2 + pad) % 2 + 2 j meet an input pixel (k = 4: 2 x 2 taps), ih = oh // 2 + (oh
% 2 + pad) // 2 - j, so each class is a plain convolution and no product is a multiply by a skipped zero.

The GEMM: rows are the OH/2 * OW/2 pooled pixels of a sample (BM = 128 per program, tiles do not cross
samples so a tile's sum belongs to one sample), columns the output channels (BN = min(128, next_pow2(Cout)):
one column tile at the full size), the reduction one block of BK input channels at one tap per step (no
div/mod per element). The weight is permuted once per call to [KH, KW, Cout, Cin] so each B tile is
K-contiguous; the A tile is gathered as [BK, BM] (lanes on the pixels: coalesced) and transposed in registers
for the dot. Same design as 11_Conv2d_ReLU.py otherwise.

The products (69 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand split into a TF32 high part and a TF32 residual, the three significant cross products accumulated in
fp32, ~2^-22 of each product dropped), which keeps fp32-level accuracy where cuDNN with TF32 off runs on the
fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
8.9e-8 (wider shapes, several pixel tiles, 72 channels: 1.0e-7)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps as in 11_Conv2d_ReLU.py, but 2 stages: with the window max held beside the accumulator ptxas for sm_90
# reports 254 registers and no spills at 2 stages (BN = 64), a few spilled bytes at 3
BM, BK = 128, 32


@triton.jit
def _tanh(x):
    # tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)): one exp, no overflow for large |x|
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, r, -r)


@triton.jit
def convt_tile(x_ptr, w_ptr, n, qh, qw, mmask, co, cmask, rh, rw, c_in, height, width, c_out,
               stride_h, stride_w, pad_h, pad_w,
               KH: tl.constexpr, KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] tile of the bias-free transposed convolution at the output pixels (n, oh, ow) = (n,
    stride_h * qh + rh, stride_w * qw + rw) of one parity class (rh, rw), output channels co: x is NCHW, w is
    [KH, KW, Cout, Cin]. Only the taps kh = (rh + pad_h) % stride_h + stride_h * jh (same along w) meet an
    input pixel, ih = qh + (rh + pad_h) // stride_h - jh: the class is a plain convolution over them."""
    kh0 = (rh + pad_h) % stride_h
    kw0 = (rw + pad_w) % stride_w
    taps_w = (KW - kw0 + stride_w - 1) // stride_w
    taps = (KH - kh0 + stride_h - 1) // stride_h * taps_w
    bh = qh + (rh + pad_h) // stride_h
    bw = qw + (rw + pad_w) // stride_w
    hw = height * width
    x_n = x_ptr + n.to(tl.int64) * c_in * hw
    ck = tl.arange(0, BK)
    blocks = tl.cdiv(c_in, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    # tap-outer, channel-block-inner: one step is BK input channels at one tap, no div/mod per element
    for step in range(0, taps * blocks):
        tap = step // blocks
        ci = (step - tap * blocks) * BK + ck
        jh = tap // taps_w
        jw = tap - jh * taps_w
        ih = bh - jh
        iw = bw - jw
        rmask = mmask & (ih >= 0) & (ih < height) & (iw >= 0) & (iw < width)
        kmask = ci < c_in
        w_tap = w_ptr + ((kh0 + stride_h * jh) * KW + kw0 + stride_w * jw) * c_out * c_in
        # [BK, BM] and [BN, BK] loads: consecutive lanes read consecutive pixels / weights
        a = tl.load(x_n[None, :] + (ci * hw)[:, None] + (ih * width + iw)[None, :],
                    mask=kmask[:, None] & rmask[None, :], other=0.0)
        b = tl.load(w_tap + (co * c_in)[:, None] + ci[None, :], mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(tl.trans(a), tl.trans(b), acc, input_precision="tf32x3")
    return acc


@triton.jit
def convt_pool_sum_kernel(
    x_ptr, w_ptr, b_ptr, part_ptr, c_in, height, width, c_out, pool_h, pool_w, pad_h, pad_w,
    KH: tl.constexpr, KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program (pooled pixel tile of one sample, sample, output channel tile); stride 2
    pool_hw = pool_h * pool_w
    p = tl.program_id(0) * BM + tl.arange(0, BM)
    n = tl.program_id(1) + tl.zeros_like(p)  # per row, as convt_tile takes it
    mmask = p < pool_hw
    qh = p // pool_w
    co = tl.program_id(2) * BN + tl.arange(0, BN)
    cmask = co < c_out
    hi = tl.full((BM, BN), float("-inf"), tl.float32)
    for r in range(0, 4):
        acc = convt_tile(x_ptr, w_ptr, n, qh, p - qh * pool_w, mmask, co, cmask, r // 2, r % 2, c_in, height,
                         width, c_out, 2, 2, pad_h, pad_w, KH, KW, BM, BN, BK)
        hi = tl.maximum(hi, acc)
    y = tl.minimum(tl.maximum(hi + tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :], -1.0), 1.0)
    s = tl.sum(tl.where(mmask[:, None], y, 0.0), axis=0)
    tl.store(part_ptr + (tl.program_id(1) * tl.num_programs(0) + tl.program_id(0)) * c_out + co, s, mask=cmask)


@triton.jit
def mean_tanh_kernel(part_ptr, out_ptr, tiles, c_out, inv_area, BT: tl.constexpr, BC: tl.constexpr):
    # program (sample): partial (tile t, channel c) at (n * tiles + t) * c_out + c; fixed summation order
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    cmask = c < c_out
    acc = tl.zeros((BT, BC), dtype=tl.float32)
    for t0 in range(0, tiles, BT):
        t = t0 + tl.arange(0, BT)
        mask = (t < tiles)[:, None] & cmask[None, :]
        acc += tl.load(part_ptr + (n * tiles + t)[:, None] * c_out + c[None, :], mask=mask, other=0.0)
    tl.store(out_ptr + n * c_out + c, _tanh(tl.sum(acc, axis=0) * inv_area), mask=cmask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        ct = self.conv_transpose
        c_in, c_out, kh, kw = ct.weight.shape
        n, _, h, wd = x.shape
        (ph, pw), (oph, opw) = ct.padding, ct.output_padding
        out_h = (h - 1) * 2 - 2 * ph + kh + oph
        out_w = (wd - 1) * 2 - 2 * pw + kw + opw
        # the pooling windows are the stride-2 parity classes (an odd last row / column is dropped by both)
        assert ct.stride == (2, 2) and ct.dilation == (1, 1) and ct.groups == 1
        w = ct.weight.permute(2, 3, 1, 0).contiguous()
        pool_h, pool_w = out_h // 2, out_w // 2
        tiles = triton.cdiv(pool_h * pool_w, BM)
        bn = min(128, max(16, triton.next_power_of_2(c_out)))
        bk = min(BK, max(16, triton.next_power_of_2(c_in)))
        part = torch.empty((n, tiles, c_out), device=x.device, dtype=torch.float32)
        convt_pool_sum_kernel[(tiles, n, triton.cdiv(c_out, bn))](
            x, w, ct.bias, part, c_in, h, wd, c_out, pool_h, pool_w, ph, pw,
            KH=kh, KW=kw, BM=BM, BN=bn, BK=bk, num_warps=8, num_stages=2,
        )
        out = torch.empty((n, c_out, 1, 1), device=x.device, dtype=x.dtype)
        bc = triton.next_power_of_2(c_out)
        mean_tanh_kernel[(n,)](
            part, out, tiles, c_out, 1.0 / (pool_h * pool_w),
            BT=max(1, min(triton.next_power_of_2(tiles), 4096 // bc)), BC=bc,
        )
        return out
