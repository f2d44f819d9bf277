"""Conv1d + GroupNorm + ReLU: cuDNN convolution without its bias, then two Triton kernels over the conv
output, which is read twice and written once (the floor without fusing into the convolution):
1. statistics: every (sample, channel) row is cut into splits; one program per split makes its mean and
   centered M2 in a single read (data shifted by the split's first value, so no cancellation);
2. normalize: one program per split again merges its group's partials (Chan's parallel formula, fixed order;
   the conv bias, constant per channel, moves a channel's mean but not its M2, so it is added here instead of
   to every element) and writes relu(y * a_c + s_c) in place, with a_c = gamma_c * rstd_g and s_c = beta_c +
   (b_c - mean_g) * a_c.
Eager runs conv + bias, group_norm (its own stats and normalize passes) and relu: ~5 passes over the 537 MB
conv output at the full size against 3 here (~0.34 ms of HBM time on the H200). With ~4096 statistics programs
every SM stays busy even though there are only 512 groups.

The convolution (172 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
9.5e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def split_stats_kernel(y_ptr, mean_ptr, m2_ptr, spatial, splits, per_split, BLOCK: tl.constexpr):
    # program (row * splits + split): mean and centered M2 of the row's elements [start, end)
    pid = tl.program_id(0)
    start = (pid % splits) * per_split
    end = tl.minimum(start + per_split, spatial)
    row = y_ptr + (pid // splits).to(tl.int64) * spatial
    shift = tl.load(row + start)
    s1 = tl.zeros([BLOCK], dtype=tl.float32)
    s2 = tl.zeros([BLOCK], dtype=tl.float32)
    for i0 in range(start, end, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        mask = offs < end
        d = tl.where(mask, tl.load(row + offs, mask=mask, other=0.0) - shift, 0.0)
        s1 += d
        s2 += d * d
    cnt = (end - start).to(tl.float32)
    t1 = tl.sum(s1, axis=0)
    tl.store(mean_ptr + pid, shift + t1 / cnt)
    tl.store(m2_ptr + pid, tl.maximum(tl.sum(s2, axis=0) - t1 * t1 / cnt, 0.0))


@triton.jit
def groupnorm_relu_kernel(
    y_ptr, mean_ptr, m2_ptr, cb_ptr, w_ptr, b_ptr, spatial, channels, splits, per_split, cpg, eps,
    BLOCK: tl.constexpr, BLOCK_P: tl.constexpr,
):
    # program (row * splits + split), row = sample * channels + channel
    pid = tl.program_id(0)
    row = pid // splits
    c = row % channels
    first = row - c % cpg  # the group's first row
    # merge the group's cpg * splits partials (contiguous, row-major)
    p = tl.arange(0, BLOCK_P)
    pmask = p < cpg * splits
    s = p % splits
    cnt = tl.minimum(per_split, spatial - s * per_split).to(tl.float32)
    ch = first % channels + p // splits
    mean_p = tl.load(mean_ptr + first * splits + p, mask=pmask, other=0.0)
    mean_p += tl.load(cb_ptr + ch, mask=pmask, other=0.0)
    total = cpg * spatial
    mean_g = tl.sum(tl.where(pmask, cnt * mean_p, 0.0), axis=0) / total
    d = mean_p - mean_g
    m2_g = tl.sum(tl.where(pmask, tl.load(m2_ptr + first * splits + p, mask=pmask, other=0.0) + cnt * d * d, 0.0),
                  axis=0)
    a = tl.load(w_ptr + c) / tl.sqrt(m2_g / total + eps)
    sh = tl.load(b_ptr + c) + (tl.load(cb_ptr + c) - mean_g) * a
    start = (pid % splits) * per_split
    end = tl.minimum(start + per_split, spatial)
    base = y_ptr + row.to(tl.int64) * spatial
    for i0 in range(start, end, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        mask = offs < end
        v = tl.load(base + offs, mask=mask)
        tl.store(base + offs, tl.maximum(v * a + sh, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv1d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c = y.shape[:2]
        spatial = y.numel() // (n * c)
        gn = self.group_norm
        cpg = c // gn.num_groups
        block = 1024
        # ~4096 programs, each split a whole number of blocks, at most 1024 partials per group
        splits = max(1, min(triton.cdiv(spatial, block), 4096 // (n * c), 1024 // cpg))
        per_split = triton.cdiv(triton.cdiv(spatial, splits), block) * block
        splits = triton.cdiv(spatial, per_split)
        mean = torch.empty(n * c * splits, device=y.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        split_stats_kernel[(n * c * splits,)](y, mean, m2, spatial, splits, per_split, BLOCK=block)
        groupnorm_relu_kernel[(n * c * splits,)](
            y, mean, m2, self.conv.bias, gn.weight, gn.bias, spatial, c, splits, per_split, cpg, gn.eps,
            BLOCK=block, BLOCK_P=triton.next_power_of_2(cpg * splits),
        )
        return y
