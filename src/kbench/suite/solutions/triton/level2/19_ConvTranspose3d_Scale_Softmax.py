"""ConvTranspose3d + scale + softmax over channels as one Triton kernel: the transposed convolution runs as an
implicit GEMM on tensor cores with the bias, the scale and the channel softmax in its epilogue (every output
channel is in the program's one column tile, so the softmax is a row operation in registers). The output (1.18
GB at the full size) is written once; eager writes the conv output, then reads and rewrites it for the scale
and again for the softmax.

The transposed convolution in gather form: out[n, co, o] = sum over ci and taps k with i = (o + pad - k) / S
integral and in range of x[n, ci, i] * w[ci, co, k] (per axis). Split by output parity r = o mod S, each class
is a regular convolution using only the taps k = r + pad (mod S) (k = 3, S = 2: 1 or 2 taps per axis), reading
input index q + (r + pad - k) / S for output o = S * q + r: no product with an inserted zero. A program owns
BM coarse voxels q (rows, flattened n * QD * QH * QW, QD = ceil(OD / S)) and every output channel (BN = Cout,
one column tile), and computes the S^3 class tiles one after the other, so the two halves of every output
row segment are written close together in time; outputs past the odd output edge (OD = 2 * D - 1 here) are
masked.

Per class the reduction walks one block of BK input channels at one tap per step (no per-element div/mod in
the k loop); the weight is permuted once per call to [Cout, K, K, K, Cin] so each B tile is K-contiguous. The
A tile is gathered as [BK, BM], lanes on the rows (consecutive rows read consecutive input voxels along W),
and the output stored as [BN, BM], lanes on the voxels of one channel plane (stride S along W); both are
transposed in registers for the dot.

The products (29 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32, ~2^-22 relative error per product), where cuDNN with TF32 off runs on the fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 8.9e-8."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps, 3 stages, BK = 16: ptxas for sm_90 reports no spills at the full size (BK = 32 spills: the
# gathered A tile's addresses are 64-bit per element)
BM, BK = 128, 16


@triton.jit
def convt_tile(x_ptr, w_ptr, n, qd, qh, qw, rmask, rd, rh, rw, co, cmask, c_in, depth, height, width,
               pad_d, pad_h, pad_w,
               K: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] tile of the bias-free transposed convolution at output voxels (S*qd + rd, S*qh + rh,
    S*qw + rw) and output channels co: x is NCDHW, w is [Cout, K, K, K, Cin]. Only the taps k = r + pad
    (mod S) reach parity class r, from input index q + (r + pad - k) / S; one step is BK input channels at
    one such tap."""
    fd = (rd + pad_d) % S
    fh = (rh + pad_h) % S
    fw = (rw + pad_w) % S
    nth = (K - fh + S - 1) // S
    ntw = (K - fw + S - 1) // S
    taps = (K - fd + S - 1) // S * nth * ntw
    hw = height * width
    x_n = x_ptr + n.to(tl.int64) * c_in * depth * hw
    ck = tl.arange(0, BK)
    blocks = tl.cdiv(c_in, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, taps * blocks):
        tap = step // blocks
        ci = (step - tap * blocks) * BK + ck
        kd = fd + tap // (nth * ntw) * S
        kh = fh + (tap // ntw) % nth * S
        kw = fw + tap % ntw * S
        # (r + pad - k) is a multiple of S: exact division
        i_d = qd + (rd + pad_d - kd) // S
        i_h = qh + (rh + pad_h - kh) // S
        i_w = qw + (rw + pad_w - kw) // S
        amask = rmask & (i_d >= 0) & (i_d < depth) & (i_h >= 0) & (i_h < height) & (i_w >= 0) & (i_w < width)
        kmask = ci < c_in
        # [BK, BM] and [BN, BK] loads: consecutive lanes read consecutive voxels / weights
        a = tl.load(x_n[None, :] + (ci * depth * hw)[:, None] + ((i_d * height + i_h) * width + i_w)[None, :],
                    mask=kmask[:, None] & amask[None, :], other=0.0)
        b = tl.load(w_ptr + (co * (K * K * K * c_in))[:, None] + (((kd * K + kh) * K + kw) * c_in + ci)[None, :],
                    mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(tl.trans(a), tl.trans(b), acc, input_precision="tf32x3")
    return acc


@triton.jit
def convt_scale_softmax_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, batch, c_in, depth, height, width, c_out, out_d, out_h, out_w,
    pad_d, pad_h, pad_w, scale,
    K: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program: BM coarse voxels (flattened n, qd, qh, qw) x all output channels
    q_d = tl.cdiv(out_d, S)
    q_h = tl.cdiv(out_h, S)
    q_w = tl.cdiv(out_w, S)
    coarse = q_d * q_h * q_w
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    mmask = m < batch * coarse
    n = m // coarse
    p = m - n * coarse
    qd = p // (q_h * q_w)
    qh = (p // q_w) % q_h
    qw = p % q_w
    co = tl.arange(0, BN)
    cmask = co < c_out
    bias = tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    out_n = out_ptr + n.to(tl.int64) * c_out * out_d * out_h * out_w
    for r in range(0, S * S * S):
        od = qd * S + r // (S * S)
        oh = qh * S + (r // S) % S
        ow = qw * S + r % S
        rmask = mmask & (od < out_d) & (oh < out_h) & (ow < out_w)
        acc = convt_tile(x_ptr, w_ptr, n, qd, qh, qw, rmask, r // (S * S), (r // S) % S, r % S, co, cmask,
                         c_in, depth, height, width, pad_d, pad_h, pad_w, K, S, BM, BN, BK)
        y = tl.where(cmask[None, :], (acc + bias) * scale, float("-inf"))
        e = tl.exp(y - tl.max(y, axis=1)[:, None])
        y = e * (1.0 / tl.sum(e, axis=1))[:, None]  # one division per voxel
        # stored as [BN, BM] so consecutive lanes write voxels of one channel plane
        dst = out_n[None, :] + (co * (out_d * out_h * out_w))[:, None] + ((od * out_h + oh) * out_w + ow)[None, :]
        tl.store(dst, tl.trans(y), mask=cmask[:, None] & rmask[None, :])


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, scale: float
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        ct = self.conv_transpose
        c_in, c_out, k = ct.weight.shape[:3]
        s = ct.stride[0]
        assert set(ct.stride) == {s} and set(ct.kernel_size) == {k} and set(ct.dilation) == {1}
        w = ct.weight.permute(1, 2, 3, 4, 0).contiguous()
        n, _, d, h, wd = x.shape
        od, oh, ow = ((i - 1) * s - 2 * p + k + op for i, p, op in zip((d, h, wd), ct.padding, ct.output_padding))
        out = torch.empty((n, c_out, od, oh, ow), device=x.device, dtype=x.dtype)
        bn = max(16, triton.next_power_of_2(c_out))
        coarse = triton.cdiv(od, s) * triton.cdiv(oh, s) * triton.cdiv(ow, s)
        convt_scale_softmax_kernel[(triton.cdiv(n * coarse, BM),)](
            x, w, ct.bias, out, n, c_in, d, h, wd, c_out, od, oh, ow, *ct.padding, float(self.scale),
            K=k, S=s, BM=BM, BN=bn, BK=BK, num_warps=8, num_stages=3,
        )
        return out
