"""LayerNorm + erf GELU: one Triton program per row (several rows for short rows). Pass 1 streams the row in
2048-float chunks keeping a running mean and M2 per lane (Welford on data shifted by the row's first element,
merged across lanes with Chan's formula); pass 2 re-reads the row from L2 (pass 1 loads it evict_last),
normalizes, applies the affine and GELU and writes once. Small per-thread state keeps many rows in flight per
SM, where a whole row in registers left one 16-warp program per SM (eager: layer_norm + gelu, two full
read+write passes)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

TILE = 2048  # floats per program per step: 8 per thread at 8 warps


@triton.jit
def _chan_merge(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    w = tl.where(n > 0, n_b / tl.maximum(n, 1.0), 0.0)
    d = mean_b - mean_a
    return mean_a + d * w, m2_a + m2_b + d * d * n_a * w, n


@triton.jit
def layernorm_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, rows, n, eps, R: tl.constexpr, CH: tl.constexpr):
    r = tl.program_id(0) * R + tl.arange(0, R)
    rmask = (r < rows)[:, None]
    lanes = tl.arange(0, CH)[None, :]
    offs = r.to(tl.int64)[:, None] * n + lanes
    # data are shifted by each row's first element so the running means stay small (no cancellation)
    shift = tl.load(x_ptr + r.to(tl.int64) * n, mask=r < rows, other=0.0)[:, None]
    mean = tl.zeros([R, CH], dtype=tl.float32)
    m2 = tl.zeros([R, CH], dtype=tl.float32)
    nfull = n // CH
    for i in range(0, nfull):
        v = tl.load(x_ptr + offs + i * CH, mask=rmask, other=0.0, eviction_policy="evict_last") - shift
        d = v - mean
        mean += d * (1.0 / (i + 1))
        m2 += d * (v - mean)
    # ragged tail: lanes past the end keep nfull samples
    tail = (nfull * CH + lanes) < n
    tmask = rmask & tail
    v = tl.load(x_ptr + offs + nfull * CH, mask=tmask, other=0.0, eviction_policy="evict_last") - shift
    d = v - mean
    mean = tl.where(tmask, mean + d * (1.0 / (nfull + 1)), mean)
    m2 = tl.where(tmask, m2 + d * (v - mean), m2)
    cnt = tl.zeros([R, CH], dtype=tl.float32) + (nfull + tail.to(tl.int32)).to(tl.float32)
    mu, q, _ = tl.reduce((mean, m2, cnt), 1, _chan_merge)
    mu = mu[:, None]
    rstd = (1.0 / tl.sqrt(q / n + eps))[:, None]
    for start in range(0, n, CH):
        cols = start + lanes
        cmask = cols < n
        mask = rmask & cmask
        v = tl.load(x_ptr + offs + start, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(w_ptr + cols, mask=cmask, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, eviction_policy="evict_last")
        y = (v - shift - mu) * rstd * w + b
        tl.store(out_ptr + offs + start, 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n
        ch = min(TILE, triton.next_power_of_2(n))
        r = TILE // ch
        ln = self.layer_norm
        layernorm_gelu_kernel[(triton.cdiv(rows, r),)](
            x, ln.weight, ln.bias, out, rows, n, ln.eps, R=r, CH=ch, num_warps=8
        )
        return out
