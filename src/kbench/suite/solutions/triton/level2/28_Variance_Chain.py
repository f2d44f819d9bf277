"""Row variance written as mean, subtract, square, mean: one Triton program per row (several rows for short
rows) streams the row once in 2048-float chunks, keeping a running mean and M2 per lane (Welford on data
shifted by the row's first element, one reciprocal per chunk), then merges all lanes at once with Chan's
formula (three row sums). One read of the input, no temporaries and no re-read (eager: mean + sub + pow +
mean, four passes and two temporaries)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TILE = 2048  # floats per program per step: 8 per thread at 8 warps


@triton.jit
def row_variance_kernel(x_ptr, out_ptr, rows, n, R: tl.constexpr, CH: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    rmask = (r < rows)[:, None]
    lanes = tl.arange(0, CH)[None, :]
    ptrs = x_ptr + r.to(tl.int64)[:, None] * n + lanes
    # data are shifted by each row's first element so the running means stay small (no cancellation)
    shift = tl.load(x_ptr + r.to(tl.int64) * n, mask=r < rows, other=0.0)[:, None]
    mean = tl.zeros([R, CH], dtype=tl.float32)
    m2 = tl.zeros([R, CH], dtype=tl.float32)
    nfull = n // CH
    for i in range(0, nfull):
        v = tl.load(ptrs + i * CH, mask=rmask, other=0.0) - shift
        d = v - mean
        mean += d * (1.0 / (i + 1))
        m2 += d * (v - mean)
    # ragged tail: lanes past the end keep nfull samples
    tail = (nfull * CH + lanes) < n
    tmask = rmask & tail
    v = tl.load(ptrs + nfull * CH, mask=tmask, other=0.0) - shift
    d = v - mean
    mean = tl.where(tmask, mean + d * (1.0 / (nfull + 1)), mean)
    m2 = tl.where(tmask, m2 + d * (v - mean), m2)
    cnt = tl.zeros([R, CH], dtype=tl.float32) + (nfull + tail.to(tl.int32)).to(tl.float32)
    # the lanes merged at once (Chan's formula over all of them): M2 = sum(M2_i) + sum(n_i (mean_i - mean)^2)
    row_mean = tl.sum(cnt * mean, 1) / n
    d = mean - row_mean[:, None]
    q = tl.sum(m2, 1) + tl.sum(cnt * d * d, 1)
    tl.store(out_ptr + r, q / n, mask=r < rows)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n = x.shape[-1]
        rows = x.numel() // n
        out = torch.empty(x.shape[:-1], device=x.device, dtype=x.dtype)
        ch = min(TILE, triton.next_power_of_2(n))
        r = TILE // ch
        row_variance_kernel[(triton.cdiv(rows, r),)](x, out, rows, n, R=r, CH=ch, num_warps=8)
        return out
