"""ConvTranspose1d (stride 2) + hardtanh + AvgPool1d(2) as one Triton implicit GEMM with the bias, the clamp
to [-0.5, 0.5] and the pooling in its epilogue: only the pooled output (134 MB at the full size) is written;
eager writes the 268 MB conv output, then hardtanh and avg_pool1d read and rewrite it.

The transposed convolution is computed as a gather: out[l] sums x[i] * w[k] over i * 2 - pad + k = l. Split by
the parity ph of l = 2m + ph, each phase is a regular stride-1 convolution over m with every other tap, k =
(ph + pad) % 2 + 2j reading x[m + (ph + pad) // 2 - j] (2 of the 4 taps at the full size). The pooling window
m is exactly (phase 0, phase 1) at m, so one program computes both phases for the same BM = 128 windows, one
accumulator each, and pools them in registers.

The GEMM of each phase: rows are the windows m of one sample, columns the output channels (BN = 64: the two
[128, 64] accumulators take the registers one [128, 128] tile would), and the reduction walks the phase's taps
as one block of BK = 32 input channels at one tap per step (no per-element div/mod in the loop). The weight is
permuted once per call to [Cout, K, Cin] so each B tile is K-contiguous. The A tile is loaded as [BK, BM] and
the output stored as [BN, BM], lanes on the positions (coalesced); both operands are transposed in registers
for the dot.

The products (69 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32; what is dropped is ~2^-22 of each product), which keeps fp32-level accuracy where cuDNN
with TF32 off runs on the fp32 SIMT units.
Only stride 2 with pool size 2 (the problem's configuration) is implemented; other values raise.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
0 (with the weights scaled by 0.1 so that no output saturates: 3.0e-8 on wider shapes)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps: two 128 x 64 accumulators, 64 registers a thread together
BM, BN, BK = 128, 64, 32


@triton.jit
def phase_tile(x_n, w_ptr, m, mmask, co, cmask, c_in, length, pad,
               PH: tl.constexpr, KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] tile of the bias-free stride-2 transposed convolution at output positions 2m + PH and
    output channels co (x_n: one sample's [Cin, L] plane, w: [Cout, KW, Cin]); one step is BK channels at one
    of the phase's taps."""
    k_first = (PH + pad) % 2
    base = (PH + pad) // 2
    taps = (KW - k_first + 1) // 2
    ck = tl.arange(0, BK)
    k_total = KW * c_in
    blocks = tl.cdiv(c_in, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, taps * blocks):
        j = step // blocks
        ci = (step - j * blocks) * BK + ck
        src = m + base - j
        rmask = mmask & (src >= 0) & (src < length)
        kmask = ci < c_in
        # [BK, BM] and [BN, BK] loads: consecutive lanes read consecutive positions / weights
        a = tl.load(x_n + (ci * length)[:, None] + src[None, :],
                    mask=kmask[:, None] & rmask[None, :], other=0.0)
        b = tl.load(w_ptr + (co * k_total)[:, None] + ((k_first + 2 * j) * c_in + ci)[None, :],
                    mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(tl.trans(a), tl.trans(b), acc, input_precision="tf32x3")
    return acc


@triton.jit
def convt_hardtanh_avgpool_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, c_in, length, c_out, lout, pad,
    KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program (window tile, sample, output channel tile); window m pools conv outputs 2m and 2m + 1
    n = tl.program_id(1)
    m = tl.program_id(0) * BM + tl.arange(0, BM)
    mmask = m < lout
    co = tl.program_id(2) * BN + tl.arange(0, BN)
    cmask = co < c_out
    x_n = x_ptr + n.to(tl.int64) * c_in * length
    bias = tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    y0 = phase_tile(x_n, w_ptr, m, mmask, co, cmask, c_in, length, pad, 0, KW, BM, BN, BK) + bias
    y0 = tl.minimum(tl.maximum(y0, -0.5), 0.5)
    y1 = phase_tile(x_n, w_ptr, m, mmask, co, cmask, c_in, length, pad, 1, KW, BM, BN, BK) + bias
    pooled = (y0 + tl.minimum(tl.maximum(y1, -0.5), 0.5)) * 0.5
    # stored as [BN, BM] so consecutive lanes write consecutive windows of one channel row
    dst = out_ptr + n.to(tl.int64) * c_out * lout + (co * lout)[:, None] + m[None, :]
    tl.store(dst, tl.trans(pooled), mask=cmask[:, None] & mmask[None, :])


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, pool_size: int
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        if ct.stride[0] != 2 or self.pool_size != 2:
            raise NotImplementedError("the fused kernel pairs the two stride phases into one pooling window")
        x = x.contiguous()
        c_in, c_out, kw = ct.weight.shape
        w = ct.weight.permute(1, 2, 0).contiguous()
        n, _, length = x.shape
        pad = ct.padding[0]
        conv_len = (length - 1) * 2 - 2 * pad + kw + ct.output_padding[0]
        lout = conv_len // 2
        out = torch.empty((n, c_out, lout), device=x.device, dtype=x.dtype)
        bn = min(BN, max(16, triton.next_power_of_2(c_out)))
        bk = min(BK, max(16, triton.next_power_of_2(c_in)))
        grid = (triton.cdiv(lout, BM), n, triton.cdiv(c_out, bn))
        convt_hardtanh_avgpool_kernel[grid](
            x, w, ct.bias, out, c_in, length, c_out, lout, pad,
            KW=kw, BM=BM, BN=bn, BK=bk, num_warps=8, num_stages=3,
        )
        return out
