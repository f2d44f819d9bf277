"""Conv1d + BatchNorm1d (training mode, batch statistics) + GELU: cuDNN convolution (it has no bias), then two
Triton kernels over the conv output, which is read twice and written once:
1. statistics: every (sample, channel) row is cut into splits; one program per split makes its mean and
   centered M2 in a single read (data shifted by the split's first value, so no cancellation);
2. normalize: one program per split merges its channel's batch * splits partials (Chan's parallel formula,
   fixed order) and writes gelu(y * a_c + s_c) in place, a_c = gamma_c * rstd_c, s_c = beta_c - mean_c * a_c
   (erf GELU, as F.gelu's default). The first sample's first split also updates the running statistics, as
   training-mode BatchNorm does.
Eager runs conv, batch_norm (a statistics pass and a normalize pass) and gelu: ~5 passes over the 537 MB conv
output at the full size against 3 here (~0.34 ms of HBM time on the H200); the statistics use ~8192 programs
where a per-channel reduction would have only 256.

The convolution (103 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
7.2e-7."""

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
def batchnorm_gelu_kernel(
    y_ptr, mean_ptr, m2_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, batch, spatial, channels, splits, per_split,
    eps, momentum, BLOCK: tl.constexpr, BLOCK_P: tl.constexpr,
):
    # program (row * splits + split), row = sample * channels + channel
    pid = tl.program_id(0)
    row = pid // splits
    c = row % channels
    # the channel's partials: sample i, split s at (i * channels + c) * splits + s
    p = tl.arange(0, BLOCK_P)
    pmask = p < batch * splits
    s = p % splits
    idx = ((p // splits) * channels + c) * splits + s
    cnt = tl.minimum(per_split, spatial - s * per_split).to(tl.float32)
    mean_p = tl.load(mean_ptr + idx, mask=pmask, other=0.0)
    total = batch * spatial
    mean = tl.sum(tl.where(pmask, cnt * mean_p, 0.0), axis=0) / total
    d = mean_p - mean
    m2 = tl.sum(tl.where(pmask, tl.load(m2_ptr + idx, mask=pmask, other=0.0) + cnt * d * d, 0.0), axis=0)
    a = tl.load(w_ptr + c) / tl.sqrt(m2 / total + eps)
    sh = tl.load(b_ptr + c) - mean * a
    if pid < channels * splits and pid % splits == 0:  # sample 0, split 0: the running statistics
        tl.store(rm_ptr + c, (1.0 - momentum) * tl.load(rm_ptr + c) + momentum * mean)
        tl.store(rv_ptr + c, (1.0 - momentum) * tl.load(rv_ptr + c) + momentum * m2 / tl.maximum(total - 1, 1))
    start = (pid % splits) * per_split
    end = tl.minimum(start + per_split, spatial)
    base = y_ptr + row.to(tl.int64) * spatial
    for i0 in range(start, end, BLOCK):
        offs = i0 + tl.arange(0, BLOCK)
        mask = offs < end
        v = tl.load(base + offs, mask=mask) * a + sh
        tl.store(base + offs, 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv1d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c = y.shape[:2]
        spatial = y.numel() // (n * c)
        bn = self.batch_norm
        block = 1024
        # ~4096 programs, each split a whole number of blocks, at most 4096 partials per channel
        splits = max(1, min(triton.cdiv(spatial, block), 4096 // (n * c), 4096 // n))
        per_split = triton.cdiv(triton.cdiv(spatial, splits), block) * block
        splits = triton.cdiv(spatial, per_split)
        mean = torch.empty(n * c * splits, device=y.device, dtype=torch.float32)
        m2 = torch.empty_like(mean)
        split_stats_kernel[(n * c * splits,)](y, mean, m2, spatial, splits, per_split, BLOCK=block)
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            batchnorm_gelu_kernel[(n * c * splits,)](
                y, mean, m2, bn.weight, bn.bias, bn.running_mean, bn.running_var, n, spatial, c, splits,
                per_split, bn.eps, bn.momentum, BLOCK=block, BLOCK_P=triton.next_power_of_2(n * splits),
            )
        return y
