"""ConvTranspose3d + SiLU + GroupNorm + HardSwish: the transposed convolution runs as a Triton implicit GEMM on
tensor cores with the bias, the SiLU and the GroupNorm statistics in its epilogue, then a normalize pass:
1. conv + silu + statistics: each program writes silu(y + b_c) for its tile and, per channel, the count, mean
   and centered M2 of what it wrote (two passes in registers per parity class, merged with Chan's formula: no
   cancellation); programs never straddle two samples, so the partials belong to one (sample, channel);
2. finalize: one program per (sample, group) merges its partials (Chan's formula, fixed order) into mean_g and
   rstd_g;
3. normalize: hardswish(gamma_c * (s - mean_g) * rstd_g + beta_c) in place.
The activation (504 MB at the full size) is written, read and written once more; eager writes the conv output,
then runs bias, silu, group_norm (statistics and normalize) and hardswish: ~8 passes over it.

The transposed convolution in gather form: out[n, co, o] = sum over ci and taps k with i = (o + pad - k) / S
integral and in range of x[n, ci, i] * w[ci, co, k] (per axis). Split by output parity r = o mod S, each class
is a regular convolution using only the taps k = r + pad (mod S) (k = 3, S = 2: 1 or 2 taps per axis), reading
input index q + (r + pad - k) / S for output o = S * q + r: no product with an inserted zero. A program owns
BM coarse voxels q of one sample (rows, flattened QD * QH * QW, QD = ceil(OD / S)) and every output channel
(BN = Cout, one column tile), and computes the S^3 class tiles one after the other, so the two halves of every
output row segment are written close together in time; outputs past the odd output edge (OD = 2 * D - 1 here)
are masked.

Per class the reduction walks one block of BK input channels at one tap per step (no per-element div/mod in
the k loop); the weight is permuted once per call to [Cout, K, K, K, Cin] so each B tile is K-contiguous. The
A tile is gathered as [BK, BM], lanes on the rows (consecutive rows read consecutive input voxels along W),
and the output stored as [BN, BM], lanes on the voxels of one channel plane (stride S along W); both are
transposed in registers for the dot.

The products (29 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32, ~2^-22 relative error per product), where cuDNN with TF32 off runs on the fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 2.4e-6."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps, 3 stages, BM = 64, BK = 16: ptxas for sm_90 reports no spills at the full size (BM = 128 spills
# ~270 bytes with the statistics epilogue; BK = 32 spills: the gathered A tile's addresses are 64-bit per element)
BM, BK = 64, 16


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
def tile_stats(v, valid):
    """Count, per-column mean and centered M2 of the valid rows of v (two passes in registers: no
    cancellation)."""
    cnt = tl.sum(valid.to(tl.float32), axis=0)
    mean = tl.sum(tl.where(valid[:, None], v, 0.0), axis=0) / tl.maximum(cnt, 1.0)
    d = tl.where(valid[:, None], v - mean[None, :], 0.0)
    return cnt, mean, tl.sum(d * d, axis=0)


@triton.jit
def merge_stats(cnt, mean, m2, cnt_b, mean_b, m2_b):
    """Chan's parallel formula: statistics of the union of two disjoint sets."""
    tot = cnt + cnt_b
    delta = mean_b - mean
    frac = cnt_b / tl.maximum(tot, 1.0)
    return tot, mean + delta * frac, m2 + m2_b + delta * delta * cnt * frac


@triton.jit
def convt_silu_stats_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, cnt_ptr, mean_ptr, m2_ptr, c_in, depth, height, width, c_out,
    out_d, out_h, out_w, pad_d, pad_h, pad_w,
    K: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program (tile, sample): BM coarse voxels (flattened qd, qh, qw) of sample n x all output channels
    n = tl.program_id(1)
    part = n * tl.num_programs(0) + tl.program_id(0)  # partials index: (sample, tile)
    q_d = tl.cdiv(out_d, S)
    q_h = tl.cdiv(out_h, S)
    q_w = tl.cdiv(out_w, S)
    p = tl.program_id(0) * BM + tl.arange(0, BM)
    pmask = p < q_d * q_h * q_w
    qd = p // (q_h * q_w)
    qh = (p // q_w) % q_h
    qw = p % q_w
    n_rows = tl.full((BM,), 0, tl.int32) + n  # the tile function takes a sample per row
    co = tl.arange(0, BN)
    cmask = co < c_out
    bias = tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    spatial = out_d * out_h * out_w
    out_n = out_ptr + n.to(tl.int64) * c_out * spatial
    cnt = tl.zeros((BN,), dtype=tl.float32)
    mean = tl.zeros((BN,), dtype=tl.float32)
    m2 = tl.zeros((BN,), dtype=tl.float32)
    for r in range(0, S * S * S):
        od = qd * S + r // (S * S)
        oh = qh * S + (r // S) % S
        ow = qw * S + r % S
        rmask = pmask & (od < out_d) & (oh < out_h) & (ow < out_w)
        acc = convt_tile(x_ptr, w_ptr, n_rows, qd, qh, qw, rmask, r // (S * S), (r // S) % S, r % S, co, cmask,
                         c_in, depth, height, width, pad_d, pad_h, pad_w, K, S, BM, BN, BK)
        v = acc + bias
        v = v * tl.sigmoid(v)
        cnt_r, mean_r, m2_r = tile_stats(v, rmask)
        cnt, mean, m2 = merge_stats(cnt, mean, m2, cnt_r, mean_r, m2_r)
        # stored as [BN, BM] so consecutive lanes write voxels of one channel plane
        dst = out_n + (co * spatial)[:, None] + ((od * out_h + oh) * out_w + ow)[None, :]
        tl.store(dst, tl.trans(v), mask=cmask[:, None] & rmask[None, :])
    tl.store(cnt_ptr + part, tl.max(cnt, axis=0))
    tl.store(mean_ptr + part * c_out + co, mean, mask=cmask)
    tl.store(m2_ptr + part * c_out + co, m2, mask=cmask)


@triton.jit
def gn_finalize_kernel(cnt_ptr, mean_ptr, m2_ptr, stats_ptr, tiles, channels, groups, cpg, eps,
                       BLOCK_P: tl.constexpr):
    # program (sample * groups + group): merges the tiles x cpg partials, fixed order, mean first then M2
    pid = tl.program_id(0)
    n = pid // groups
    c0 = (pid % groups) * cpg
    parts = tiles * cpg
    acc_n = tl.zeros([BLOCK_P], dtype=tl.float32)
    acc_m = tl.zeros([BLOCK_P], dtype=tl.float32)
    for e0 in range(0, parts, BLOCK_P):
        e = e0 + tl.arange(0, BLOCK_P)
        emask = e < parts
        t = n * tiles + e // cpg
        cnt = tl.load(cnt_ptr + t, mask=emask, other=0.0)
        acc_n += cnt
        acc_m += cnt * tl.load(mean_ptr + t * channels + c0 + e % cpg, mask=emask, other=0.0)
    total = tl.sum(acc_n, axis=0)
    mean = tl.sum(acc_m, axis=0) / total
    acc_q = tl.zeros([BLOCK_P], dtype=tl.float32)
    for e0 in range(0, parts, BLOCK_P):
        e = e0 + tl.arange(0, BLOCK_P)
        emask = e < parts
        t = n * tiles + e // cpg
        idx = t * channels + c0 + e % cpg
        cnt = tl.load(cnt_ptr + t, mask=emask, other=0.0)
        d = tl.load(mean_ptr + idx, mask=emask, other=0.0) - mean
        acc_q += tl.load(m2_ptr + idx, mask=emask, other=0.0) + cnt * d * d
    tl.store(stats_ptr + 2 * pid, mean)
    tl.store(stats_ptr + 2 * pid + 1, 1.0 / tl.sqrt(tl.sum(acc_q, axis=0) / total + eps))


@triton.jit
def groupnorm_hardswish_kernel(y_ptr, stats_ptr, w_ptr, gb_ptr, spatial, channels, cpg, BLOCK: tl.constexpr):
    # program (plane, block), plane = sample * channels + channel
    plane = tl.program_id(0)
    c = plane % channels
    g = plane // cpg  # = sample * groups + group
    a = tl.load(w_ptr + c) * tl.load(stats_ptr + 2 * g + 1)
    sh = tl.load(gb_ptr + c) - tl.load(stats_ptr + 2 * g) * a
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < spatial
    ptr = y_ptr + plane.to(tl.int64) * spatial + offs
    z = tl.load(ptr, mask=mask) * a + sh
    tl.store(ptr, z * tl.minimum(tl.maximum(z + 3.0, 0.0), 6.0) * (1.0 / 6.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        num_groups: int,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

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
        tiles = triton.cdiv(triton.cdiv(od, s) * triton.cdiv(oh, s) * triton.cdiv(ow, s), BM)
        cnt = torch.empty(n * tiles, device=x.device, dtype=torch.float32)
        mean = torch.empty((n * tiles, c_out), device=x.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        convt_silu_stats_kernel[(tiles, n)](
            x, w, ct.bias, out, cnt, mean, m2, c_in, d, h, wd, c_out, od, oh, ow, *ct.padding,
            K=k, S=s, BM=BM, BN=max(16, triton.next_power_of_2(c_out)), BK=BK, num_warps=8, num_stages=3,
        )
        gn = self.group_norm
        groups = gn.num_groups
        cpg = c_out // groups
        stats = torch.empty(2 * n * groups, device=x.device, dtype=torch.float32)
        gn_finalize_kernel[(n * groups,)](
            cnt, mean, m2, stats, tiles, c_out, groups, cpg, gn.eps,
            BLOCK_P=min(1024, triton.next_power_of_2(tiles * cpg)),
        )
        spatial = od * oh * ow
        block = min(1024, triton.next_power_of_2(spatial))
        groupnorm_hardswish_kernel[(n * c_out, triton.cdiv(spatial, block))](
            out, stats, gn.weight, gn.bias, spatial, c_out, cpg, BLOCK=block
        )
        return out
