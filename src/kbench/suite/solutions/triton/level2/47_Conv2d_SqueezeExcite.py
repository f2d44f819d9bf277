"""Conv2d + squeeze-and-excitation as three Triton kernels:
1. an implicit-GEMM convolution whose epilogue adds the bias, writes the output once and sums each channel
   over its tile (per-tile partial sums, 2 MB at the full size);
2. excite: one program per sample adds its tiles' sums in a fixed order (deterministic), divides by the pixel
   count and runs the whole gate MLP in registers, g = sigmoid(W2 relu(W1 s + b1) + b2);
3. scale: y * g_c in place, over (plane, block) programs with a per-program scalar.
The conv output (268 MB at the full size) is written once, read once and rewritten once; eager also adds
the bias (read + write), reads it for the mean, launches two tiny GEMMs and their activations and writes the
product through broadcasting.

The convolution's GEMM: rows are the OH*OW output pixels of one sample (BM = 128 consecutive ones per
program, the sample in the grid so a tile's sums belong to one sample), columns the output channels (BN =
min(128, next_pow2(Cout)) = 128 at the full size), and the reduction walks K = KH*KW*Cin as one block of BK =
32 input channels at one kernel tap per step (no per-element div/mod in the k loop). The A tile is gathered
from the NCHW input as [BK, BM], lanes on the pixels (coalesced), zero padding by masks; the weight is
permuted once per call to [Cout, KH, KW, Cin] so each B tile is K-contiguous; both are transposed in
registers for the dot. The output is stored as [BN, BM], lanes on the pixels.

The products (77 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32), which keeps fp32-level accuracy -- the 1e-4 tolerance holds with a wide margin -- where
cuDNN with TF32 off runs on the fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
3.6e-7."""

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
def conv_tilesum_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, part_ptr, c_in, height, width, c_out, out_h, out_w,
    stride_h, stride_w, pad_h, pad_w, dil_h, dil_w,
    KH: tl.constexpr, KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program (pixel tile t, channel tile, sample n): writes y = conv + b and part[n, t, c] = sum of y over the tile
    t = tl.program_id(0)
    n = tl.program_id(2)
    out_hw = out_h * out_w
    p = t * BM + tl.arange(0, BM)
    mmask = p < out_hw
    oh = p // out_w
    co = tl.program_id(1) * BN + tl.arange(0, BN)
    cmask = co < c_out
    x_off = tl.zeros((BM,), dtype=tl.int64) + n.to(tl.int64) * c_in * height * width
    acc = conv_tile(x_ptr, w_ptr, x_off, oh, p - oh * out_w, mmask, co, cmask, c_in, height, width,
                    stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, KH, KW, BM, BN, BK)
    y = acc + tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    # stored as [BN, BM] so consecutive lanes write consecutive pixels of one channel plane
    dst = out_ptr + n.to(tl.int64) * c_out * out_hw + (co * out_hw)[:, None] + p[None, :]
    tl.store(dst, tl.trans(y), mask=cmask[:, None] & mmask[None, :])
    part = (n * tl.num_programs(0) + t).to(tl.int64) * c_out + co
    tl.store(part_ptr + part, tl.sum(tl.where(mmask[:, None], y, 0.0), axis=0), mask=cmask)


@triton.jit
def excite_kernel(part_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, gate_ptr, channels, hidden, tiles, hw,
                  BT: tl.constexpr, BC: tl.constexpr, BH: tl.constexpr):
    # program (sample): s = mean over the tiles' sums; h = relu(W1 s + b1); g = sigmoid(W2 h + b2)
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    j = tl.arange(0, BH)
    cmask = c < channels
    jmask = j < hidden
    acc = tl.zeros([BT, BC], dtype=tl.float32)
    for t0 in range(0, tiles, BT):
        t = t0 + tl.arange(0, BT)
        mask = (t < tiles)[:, None] & cmask[None, :]
        acc += tl.load(part_ptr + (n * tiles + t[:, None]).to(tl.int64) * channels + c[None, :], mask=mask,
                       other=0.0)
    s = tl.sum(acc, axis=0) / hw
    wmask = jmask[:, None] & cmask[None, :]
    w1 = tl.load(w1_ptr + j[:, None] * channels + c[None, :], mask=wmask, other=0.0)  # [hidden, channels]
    h = tl.maximum(tl.sum(w1 * s[None, :], axis=1) + tl.load(b1_ptr + j, mask=jmask, other=0.0), 0.0)
    w2t = tl.load(w2_ptr + c[None, :] * hidden + j[:, None], mask=wmask, other=0.0)  # W2^T: [hidden, channels]
    g = tl.sigmoid(tl.sum(w2t * h[:, None], axis=0) + tl.load(b2_ptr + c, mask=cmask, other=0.0))
    tl.store(gate_ptr + n * channels + c, g, mask=cmask)


@triton.jit
def scale_kernel(y_ptr, gate_ptr, hw, BLOCK: tl.constexpr):
    # program (plane = sample * channels + c, block): y *= g[n, c], in place
    plane = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < hw
    ptr = y_ptr + plane.to(tl.int64) * hw + offs
    tl.store(ptr, tl.load(ptr, mask=mask) * tl.load(gate_ptr + plane), mask=mask)


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
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, reduction: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc1 = nn.Linear(out_channels, out_channels // reduction)
        self.fc2 = nn.Linear(out_channels // reduction, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c_in, h, wd = x.shape
        c_out = self.conv.out_channels
        w, (kh, kw), (out_h, out_w), geo = conv_geometry(self.conv, x)
        out_hw = out_h * out_w
        y = torch.empty((n, c_out, out_h, out_w), device=x.device, dtype=x.dtype)
        bn = min(128, max(16, triton.next_power_of_2(c_out)))
        bk = min(BK, max(16, triton.next_power_of_2(c_in)))
        tiles = triton.cdiv(out_hw, BM)
        part = torch.empty((n, tiles, c_out), device=x.device, dtype=torch.float32)
        conv_tilesum_kernel[(tiles, triton.cdiv(c_out, bn), n)](
            x, w, self.conv.bias, y, part, c_in, h, wd, c_out, out_h, out_w, *geo,
            KH=kh, KW=kw, BM=BM, BN=bn, BK=bk, num_warps=8, num_stages=3,
        )
        gate = torch.empty((n, c_out), device=x.device, dtype=torch.float32)
        hidden = self.fc1.out_features
        excite_kernel[(n,)](
            part, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, gate, c_out, hidden, tiles,
            out_hw, BT=32, BC=triton.next_power_of_2(c_out), BH=triton.next_power_of_2(hidden),
        )
        block = min(1024, triton.next_power_of_2(out_hw))
        scale_kernel[(n * c_out, triton.cdiv(out_hw, block))](y, gate, out_hw, BLOCK=block)
        return y
