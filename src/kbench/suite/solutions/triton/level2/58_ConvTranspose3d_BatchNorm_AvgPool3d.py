"""ConvTranspose3d + BatchNorm3d (training mode, batch statistics) + AvgPool3d(2): the transposed convolution
runs as a Triton implicit GEMM on tensor cores with the pooling and the statistics in its epilogue, so the
convolution's output (537 MB at the full size) never reaches memory. BatchNorm is a per-channel affine map once
its statistics are known, so it commutes with average pooling:
1. conv + pool + statistics: each program writes the window means of its BM pooled voxels (the unnormalized
   pooled output) and, per channel, the count, mean and centered M2 of the conv values those windows cover
   (two passes in registers per parity class, merged with Chan's formula: no cancellation);
2. finalize: one program per channel merges the per-tile partials (Chan's formula, fixed order) into a_c =
   gamma_c * rstd_c and s_c = beta_c - mean_c * a_c and updates the running statistics (unbiased variance),
   as nn.BatchNorm3d does in training mode;
3. apply: pooled * a_c + s_c in place on the 8x smaller output (67 MB at the full size).
Eager writes the conv output, reads it for the statistics, reads and writes it to normalize and reads it again
to pool.

The transposed convolution in gather form: out[n, co, o] = sum over ci and taps k with i = (o + pad - k) / S
integral and in range of x[n, ci, i] * w[ci, co, k] (per axis). Split by output parity r = o mod S, each class
is a regular convolution using only the taps k = r + pad (mod S) (k = 3, S = 2: 1 or 2 taps per axis), reading
input index q + (r + pad - k) / S for output o = S * q + r: no product with an inserted zero. With S = 2 =
the pooling window, pooled voxel q covers the outputs S * q + r, exactly one of each of the 8 parity classes:
a program owns BM pooled voxels (rows, flattened n * PD * PH * PW) and every output channel (BN = Cout, one
column tile), computes the 8 class tiles one after the other and sums them in registers.

Per class the reduction walks one block of BK input channels at one tap per step (no per-element div/mod in
the k loop); the weight is permuted once per call to [Cout, K, K, K, Cin] so each B tile is K-contiguous. The
A tile is gathered as [BK, BM], lanes on the rows (consecutive rows read consecutive input voxels along W),
and the pooled output stored as [BN, BM], lanes on the pooled voxels of one channel plane; both are transposed
in registers for the dot.

The products (29 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32, ~2^-22 relative error per product), where cuDNN with TF32 off runs on the fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter): 3.0e-7."""

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
def convt_avgpool_stats_kernel(
    x_ptr, w_ptr, out_ptr, cnt_ptr, mean_ptr, m2_ptr, batch, c_in, depth, height, width, c_out,
    pool_d, pool_h, pool_w, pad_d, pad_h, pad_w,
    K: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program: BM pooled voxels (flattened n, qd, qh, qw) x all output channels
    pid = tl.program_id(0)
    pool = pool_d * pool_h * pool_w
    m = pid * BM + tl.arange(0, BM)
    rmask = m < batch * pool
    n = m // pool
    p = m - n * pool
    qd = p // (pool_h * pool_w)
    qh = (p // pool_w) % pool_h
    qw = p % pool_w
    co = tl.arange(0, BN)
    cmask = co < c_out
    total = tl.zeros((BM, BN), dtype=tl.float32)
    cnt = tl.zeros((BN,), dtype=tl.float32)
    mean = tl.zeros((BN,), dtype=tl.float32)
    m2 = tl.zeros((BN,), dtype=tl.float32)
    for r in range(0, S * S * S):
        acc = convt_tile(x_ptr, w_ptr, n, qd, qh, qw, rmask, r // (S * S), (r // S) % S, r % S, co, cmask,
                         c_in, depth, height, width, pad_d, pad_h, pad_w, K, S, BM, BN, BK)
        total += acc
        cnt_r, mean_r, m2_r = tile_stats(acc, rmask)
        cnt, mean, m2 = merge_stats(cnt, mean, m2, cnt_r, mean_r, m2_r)
    # stored as [BN, BM] so consecutive lanes write consecutive pooled voxels of one channel plane
    dst = out_ptr + (n.to(tl.int64) * c_out * pool + p)[None, :] + (co * pool)[:, None]
    tl.store(dst, tl.trans(total * (1.0 / (S * S * S))), mask=cmask[:, None] & rmask[None, :])
    tl.store(cnt_ptr + pid, tl.max(cnt, axis=0))
    tl.store(mean_ptr + pid * c_out + co, mean, mask=cmask)
    tl.store(m2_ptr + pid * c_out + co, m2, mask=cmask)


@triton.jit
def bn_finalize_kernel(cnt_ptr, mean_ptr, m2_ptr, g_ptr, b_ptr, rm_ptr, rv_ptr, ss_ptr, tiles, channels,
                       eps, momentum, BLOCK_T: tl.constexpr):
    # program (channel): merges the per-tile partials, fixed order, mean first then M2 around it
    c = tl.program_id(0)
    acc_n = tl.zeros([BLOCK_T], dtype=tl.float32)
    acc_m = tl.zeros([BLOCK_T], dtype=tl.float32)
    for t0 in range(0, tiles, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        cnt = tl.load(cnt_ptr + t, mask=t < tiles, other=0.0)
        acc_n += cnt
        acc_m += cnt * tl.load(mean_ptr + t * channels + c, mask=t < tiles, other=0.0)
    total = tl.sum(acc_n, axis=0)
    mean = tl.sum(acc_m, axis=0) / total
    acc_q = tl.zeros([BLOCK_T], dtype=tl.float32)
    for t0 in range(0, tiles, BLOCK_T):
        t = t0 + tl.arange(0, BLOCK_T)
        cnt = tl.load(cnt_ptr + t, mask=t < tiles, other=0.0)
        d = tl.load(mean_ptr + t * channels + c, mask=t < tiles, other=0.0) - mean
        acc_q += tl.load(m2_ptr + t * channels + c, mask=t < tiles, other=0.0) + cnt * d * d
    m2 = tl.sum(acc_q, axis=0)
    a = tl.load(g_ptr + c) / tl.sqrt(m2 / total + eps)
    tl.store(ss_ptr + c, a)
    tl.store(ss_ptr + channels + c, tl.load(b_ptr + c) - mean * a)
    tl.store(rm_ptr + c, (1.0 - momentum) * tl.load(rm_ptr + c) + momentum * mean)
    tl.store(rv_ptr + c, (1.0 - momentum) * tl.load(rv_ptr + c) + momentum * m2 / tl.maximum(total - 1.0, 1.0))


@triton.jit
def affine_kernel(out_ptr, ss_ptr, npool, channels, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    o = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = o < npool
    c = plane % channels
    ptr = out_ptr + plane.to(tl.int64) * npool + o
    tl.store(ptr, tl.load(ptr, mask=mask) * tl.load(ss_ptr + c) + tl.load(ss_ptr + channels + c), mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            bias=False,
        )
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        ct = self.conv_transpose
        c_in, c_out, k = ct.weight.shape[:3]
        s = ct.stride[0]
        # the parity split pools in registers: one window of 2 per axis = one output of each parity class
        assert s == 2 and set(ct.stride) == {s} and set(ct.kernel_size) == {k} and set(ct.dilation) == {1}
        w = ct.weight.permute(1, 2, 3, 4, 0).contiguous()
        n, _, d, h, wd = x.shape
        out_dims = [(i - 1) * s - 2 * p + k + op for i, p, op in zip((d, h, wd), ct.padding, ct.output_padding)]
        # every conv value is in exactly one window (the statistics are taken over the windows)
        assert all(o % 2 == 0 for o in out_dims)
        pd, ph, pw = (o // 2 for o in out_dims)
        npool = pd * ph * pw
        out = torch.empty((n, c_out, pd, ph, pw), device=x.device, dtype=x.dtype)
        tiles = triton.cdiv(n * npool, BM)
        cnt = torch.empty(tiles, device=x.device, dtype=torch.float32)
        mean = torch.empty((tiles, c_out), device=x.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        convt_avgpool_stats_kernel[(tiles,)](
            x, w, out, cnt, mean, m2, n, c_in, d, h, wd, c_out, pd, ph, pw, *ct.padding,
            K=k, S=s, BM=BM, BN=max(16, triton.next_power_of_2(c_out)), BK=BK, num_warps=8, num_stages=3,
        )
        bn = self.batch_norm
        scale_shift = torch.empty(2 * c_out, device=x.device, dtype=torch.float32)
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            bn_finalize_kernel[(c_out,)](
                cnt, mean, m2, bn.weight, bn.bias, bn.running_mean, bn.running_var, scale_shift, tiles, c_out,
                bn.eps, bn.momentum, BLOCK_T=min(1024, triton.next_power_of_2(tiles)),
            )
        block = min(1024, triton.next_power_of_2(npool))
        affine_kernel[(n * c_out, triton.cdiv(npool, block))](out, scale_shift, npool, c_out, BLOCK=block)
        return out
