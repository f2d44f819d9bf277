"""Conv3d + GroupNorm + mean: cuDNN convolution without its bias (NCDHW, as torch.compile also runs 3-D
convolutions); every (sample, channel) plane is cut into splits, and one Triton program per split makes its
mean and centered M2 in a single read (sums shifted by the split's first value). A second kernel per sample
merges the splits (exact parallel formula, fixed order) into per-channel means and M2, forms each group's mean
and variance from them (M2_g = sum_c M2_c + S (mean_c - mean_g)^2) and gives the mean of the normalized affine
output in closed form, sum_c gamma_c * (mean_c - mean_g) * rstd_g + beta_c, so the normalized tensor is never
materialized and the activation is read once (eager: conv + bias + group_norm + mean)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def split_stats_kernel(y_ptr, mean_ptr, m2_ptr, spatial, splits, per_split, BLOCK: tl.constexpr):
    # program (plane * splits + split): mean and centered M2 of the plane's elements [start, end)
    pid = tl.program_id(0)
    start = (pid % splits) * per_split
    end = tl.minimum(start + per_split, spatial)
    plane = y_ptr + (pid // splits).to(tl.int64) * spatial
    shift = tl.load(plane + start)
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for i0 in range(start, end, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        mask = offs < end
        d = tl.where(mask, tl.load(plane + offs, mask=mask, other=0.0) - shift, 0.0)
        s1 += d
        s2 += d * d
    cnt = (end - start).to(tl.float32)
    t1 = tl.sum(s1, axis=0)
    tl.store(mean_ptr + pid, shift + t1 / cnt)
    tl.store(m2_ptr + pid, tl.maximum(tl.sum(s2, axis=0) - t1 * t1 / cnt, 0.0))


@triton.jit
def groupnorm_mean_kernel(
    mean_ptr,
    m2_ptr,
    cb_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    spatial,
    channels,
    splits,
    per_split,
    cpg,
    groups,
    eps,
    BLOCK_C: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_G: tl.constexpr,
):
    # program (sample): all channels in one block
    n = tl.program_id(0)
    c = tl.arange(0, BLOCK_C)
    cmask = c < channels
    # per-channel mean = sum(n_s mean_s) / S and M2 = sum(M2_s + n_s (mean_s - mean)^2)
    acc = tl.zeros([BLOCK_C, BLOCK_S], dtype=tl.float32)
    for s0 in range(0, splits, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        mask = cmask[:, None] & (s < splits)[None, :]
        cnt = tl.minimum(per_split, spatial - s * per_split).to(tl.float32)
        idx = (n * channels + c)[:, None] * splits + s[None, :]
        acc += tl.where(mask, tl.load(mean_ptr + idx, mask=mask, other=0.0) * cnt[None, :], 0.0)
    mean_c = tl.sum(acc, axis=1) / spatial
    acc = tl.zeros([BLOCK_C, BLOCK_S], dtype=tl.float32)
    for s0 in range(0, splits, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        mask = cmask[:, None] & (s < splits)[None, :]
        cnt = tl.minimum(per_split, spatial - s * per_split).to(tl.float32)
        idx = (n * channels + c)[:, None] * splits + s[None, :]
        d = tl.load(mean_ptr + idx, mask=mask, other=0.0) - mean_c[:, None]
        m2_s = tl.load(m2_ptr + idx, mask=mask, other=0.0)
        acc += tl.where(mask, m2_s + cnt[None, :] * d * d, 0.0)
    m2_c = tl.sum(acc, axis=1)
    mean_c += tl.load(cb_ptr + c, mask=cmask, other=0.0)  # the conv bias shifts means, not M2
    # group membership as a [groups, channels] mask
    g = tl.arange(0, BLOCK_G)
    member = ((c // cpg)[None, :] == g[:, None]) & cmask[None, :] & (g < groups)[:, None]
    mean_g = tl.sum(tl.where(member, mean_c[None, :], 0.0), axis=1) / cpg
    mean_gc = tl.sum(tl.where(member, mean_g[:, None], 0.0), axis=0)  # each channel's group mean
    dev = mean_c - mean_gc
    m2_g = tl.sum(tl.where(member, (m2_c + spatial * dev * dev)[None, :], 0.0), axis=1)
    rstd_g = 1.0 / tl.sqrt(m2_g / (cpg * spatial) + eps)
    rstd_c = tl.sum(tl.where(member, rstd_g[:, None], 0.0), axis=0)
    gamma = tl.load(w_ptr + c, mask=cmask, other=0.0)
    beta = tl.load(b_ptr + c, mask=cmask, other=0.0)
    total = tl.sum(tl.where(cmask, gamma * dev * rstd_c + beta, 0.0), axis=0)
    tl.store(out_ptr + n, total / channels)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        # GroupNorm's default affine (1, 0) makes every sample's mean exactly 0 whatever the input; a random
        # affine keeps the input and every parameter in the result.
        nn.init.normal_(self.group_norm.weight, 1.0, 0.5)
        nn.init.normal_(self.group_norm.bias, 0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c = y.shape[:2]
        spatial = y.numel() // (n * c)
        gn = self.group_norm
        block = 1024
        # about 4096 statistics programs; each split a whole number of blocks
        splits = max(1, min(triton.cdiv(spatial, block), 4096 // (n * c)))
        per_split = triton.cdiv(triton.cdiv(spatial, splits), block) * block
        splits = triton.cdiv(spatial, per_split)
        mean = torch.empty(n * c * splits, device=y.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        split_stats_kernel[(n * c * splits,)](y, mean, m2, spatial, splits, per_split, BLOCK=block)
        out = torch.empty(n, device=y.device, dtype=y.dtype)
        block_c = triton.next_power_of_2(c)
        block_s = max(1, min(triton.next_power_of_2(splits), 4096 // block_c))
        groupnorm_mean_kernel[(n,)](
            mean,
            m2,
            self.conv.bias,
            gn.weight,
            gn.bias,
            out,
            spatial,
            c,
            splits,
            per_split,
            c // gn.num_groups,
            gn.num_groups,
            gn.eps,
            BLOCK_C=block_c,
            BLOCK_S=block_s,
            BLOCK_G=triton.next_power_of_2(gn.num_groups),
        )
        return out
