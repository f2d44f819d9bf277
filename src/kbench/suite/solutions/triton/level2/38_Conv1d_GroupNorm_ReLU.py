"""Conv1d + GroupNorm + ReLU: a Triton implicit-GEMM convolution whose epilogue adds the bias and makes the
GroupNorm statistics, then two light kernels; the conv output is written once and read and rewritten once:
1. conv + statistics: each [BM positions, BN channels] tile stores its conv output (bias added) and, per
   channel, the tile's mean and centered M2 (two passes over the accumulator in registers: no cancellation);
2. finalize: one program per (sample, group) merges the group's channels * tiles partials (Chan's parallel
   formula, fixed order) into a_c = gamma_c * rstd_g and s_c = beta_c - mean_g * a_c for its channels;
3. normalize: relu(y * a_c + s_c) in place.
Eager runs conv + bias, group_norm (its own statistics and normalize passes) and relu: ~5 passes over the
537 MB conv output at the full size against 3 here.

The GEMM: rows are the output positions of one sample (BM = 128 consecutive ones per program), columns the
output channels (BN = 128, two column tiles at Cout = 256), and the reduction walks K = KW*Cin as one block of
BK = 32 input channels at one kernel tap per step (no per-element div/mod in the loop). The weight is
permuted once per call to [Cout, KW, Cin] so each B tile is K-contiguous. The A tile is loaded as [BK, BM]
and the output stored as [BN, BM], lanes on the positions (coalesced); both operands are transposed in
registers for the dot.

The products (172 GFLOP at the full size) run on tensor cores as 3xTF32 (input_precision="tf32x3": each fp32
operand is split into a TF32 high part and a TF32 residual and the three significant cross products are
accumulated in fp32; what is dropped is ~2^-22 of each product), which keeps fp32-level accuracy where cuDNN
with TF32 off runs on the fp32 SIMT units.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
1.4e-6."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

# 8 warps: the 128 x 128 accumulator is 64 registers a thread (as in 11_Conv2d_ReLU)
BM, BK = 128, 32


@triton.jit
def conv1d_tile(x_n, w_ptr, pos, pmask, co, cmask, c_in, length, pad,
                KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 [BM, BN] tile of the bias-free stride-1 convolution of one sample (x_n: its [Cin, L] plane) at
    output positions pos and output channels co; w is [Cout, KW, Cin]; one step is BK channels at one tap."""
    ck = tl.arange(0, BK)
    k_total = KW * c_in
    blocks = tl.cdiv(c_in, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for step in range(0, KW * blocks):
        tap = step // blocks
        ci = (step - tap * blocks) * BK + ck
        src = pos - pad + tap
        rmask = pmask & (src >= 0) & (src < length)
        kmask = ci < c_in
        # [BK, BM] and [BN, BK] loads: consecutive lanes read consecutive positions / weights
        a = tl.load(x_n + (ci * length)[:, None] + src[None, :],
                    mask=kmask[:, None] & rmask[None, :], other=0.0)
        b = tl.load(w_ptr + (co * k_total)[:, None] + (tap * c_in + ci)[None, :],
                    mask=cmask[:, None] & kmask[None, :], other=0.0)
        acc = tl.dot(tl.trans(a), tl.trans(b), acc, input_precision="tf32x3")
    return acc


@triton.jit
def conv_stats_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, m2_ptr, c_in, length, c_out, conv_len, pad,
    KW: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
):
    # program (position tile t, sample n, output channel tile);
    # the partials of (n, c, t) are at (n * Cout + c) * T + t
    t = tl.program_id(0)
    n = tl.program_id(1)
    pos = t * BM + tl.arange(0, BM)
    pmask = pos < conv_len
    co = tl.program_id(2) * BN + tl.arange(0, BN)
    cmask = co < c_out
    x_n = x_ptr + n.to(tl.int64) * c_in * length
    acc = conv1d_tile(x_n, w_ptr, pos, pmask, co, cmask, c_in, length, pad, KW, BM, BN, BK)
    acc += tl.load(b_ptr + co, mask=cmask, other=0.0)[None, :]
    cnt = tl.minimum(BM, conv_len - t * BM).to(tl.float32)
    mean = tl.sum(tl.where(pmask[:, None], acc, 0.0), axis=0) / cnt
    d = tl.where(pmask[:, None], acc - mean[None, :], 0.0)
    part = (n * c_out + co) * tl.num_programs(0) + t
    tl.store(mean_ptr + part, mean, mask=cmask)
    tl.store(m2_ptr + part, tl.sum(d * d, axis=0), mask=cmask)
    # stored as [BN, BM] so consecutive lanes write consecutive positions of one channel row
    dst = y_ptr + n.to(tl.int64) * c_out * conv_len + (co * conv_len)[:, None] + pos[None, :]
    tl.store(dst, tl.trans(acc), mask=cmask[:, None] & pmask[None, :])


@triton.jit
def finalize_kernel(
    mean_ptr, m2_ptr, w_ptr, b_ptr, scale_ptr, shift_ptr, channels, tiles, conv_len, cpg, eps,
    TILE: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):
    # program (sample * groups + group): the group's rows are contiguous, so are its cpg * tiles partials
    first = tl.program_id(0) * cpg  # the group's first row, sample * channels + channel
    base = first * tiles
    count = cpg * tiles
    total = cpg * conv_len
    s1 = tl.zeros([BLOCK_P], dtype=tl.float32)
    for p0 in range(0, count, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        pm = p < count
        cnt = tl.minimum(TILE, conv_len - (p % tiles) * TILE).to(tl.float32)
        s1 += tl.where(pm, cnt * tl.load(mean_ptr + base + p, mask=pm), 0.0)
    mean = tl.sum(s1, axis=0) / total
    s2 = tl.zeros([BLOCK_P], dtype=tl.float32)
    for p0 in range(0, count, BLOCK_P):
        p = p0 + tl.arange(0, BLOCK_P)
        pm = p < count
        cnt = tl.minimum(TILE, conv_len - (p % tiles) * TILE).to(tl.float32)
        d = tl.load(mean_ptr + base + p, mask=pm, other=0.0) - mean
        s2 += tl.where(pm, tl.load(m2_ptr + base + p, mask=pm, other=0.0) + cnt * d * d, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(s2, axis=0) / total + eps)
    # the group's channels: rows first .. first + cpg - 1, all of one sample
    j = tl.arange(0, BLOCK_C)
    jm = j < cpg
    ch = first % channels + j
    a = tl.load(w_ptr + ch, mask=jm) * rstd
    tl.store(scale_ptr + first + j, a, mask=jm)
    tl.store(shift_ptr + first + j, tl.load(b_ptr + ch, mask=jm) - mean * a, mask=jm)


@triton.jit
def normalize_relu_kernel(y_ptr, scale_ptr, shift_ptr, conv_len, BLOCK: tl.constexpr):
    # program (row = sample * channels + channel, block of positions), in place
    row = tl.program_id(0)
    offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < conv_len
    ptr = y_ptr + row.to(tl.int64) * conv_len + offs
    v = tl.load(ptr, mask=mask) * tl.load(scale_ptr + row) + tl.load(shift_ptr + row)
    tl.store(ptr, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        conv, gn = self.conv, self.group_norm
        c_out, c_in, kw = conv.weight.shape
        w = conv.weight.permute(0, 2, 1).contiguous()
        n, _, length = x.shape
        pad = conv.padding[0]
        conv_len = length + 2 * pad - kw + 1
        y = torch.empty((n, c_out, conv_len), device=x.device, dtype=x.dtype)
        tiles = triton.cdiv(conv_len, BM)
        mean = torch.empty(n * c_out * tiles, device=x.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        bnc = min(128, max(16, triton.next_power_of_2(c_out)))
        bk = min(BK, max(16, triton.next_power_of_2(c_in)))
        conv_stats_kernel[(tiles, n, triton.cdiv(c_out, bnc))](
            x, w, conv.bias, y, mean, m2, c_in, length, c_out, conv_len, pad,
            KW=kw, BM=BM, BN=bnc, BK=bk, num_warps=8, num_stages=3,
        )
        # per (sample, channel) row: the normalization's scale and shift
        scale = torch.empty(n * c_out, device=x.device, dtype=torch.float32)
        shift = torch.empty_like(scale)
        cpg = c_out // gn.num_groups
        finalize_kernel[(n * gn.num_groups,)](
            mean, m2, gn.weight, gn.bias, scale, shift, c_out, tiles, conv_len, cpg, gn.eps,
            TILE=BM, BLOCK_P=min(1024, triton.next_power_of_2(cpg * tiles)),
            BLOCK_C=triton.next_power_of_2(cpg),
        )
        block = 1024
        grid = (n * c_out, triton.cdiv(conv_len, block))
        normalize_relu_kernel[grid](y, scale, shift, conv_len, BLOCK=block)
        return y
