"""Residual add + LayerNorm: one Triton program per row (several rows for short rows) computes x + residual on
the fly, so the sum is never written. Pass 1 streams both inputs in 2048-float chunks keeping a running mean
and M2 per lane (Welford on data shifted by the row's first element, merged across lanes with Chan's formula);
pass 2 re-reads them from L2 (pass 1 loads them evict_last) and writes the normalized row once. Small
per-thread state keeps many rows in flight per SM (eager: add + layer_norm)."""

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
def _load_sum_keep(x_ptr, r_ptr, offs, mask):
    # x + residual for pass 1, kept in L2 for pass 2
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")
    return x + tl.load(r_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_last")


@triton.jit
def add_layernorm_kernel(
    x_ptr, res_ptr, w_ptr, b_ptr, out_ptr, rows, n, eps, R: tl.constexpr, CH: tl.constexpr
):
    r = tl.program_id(0) * R + tl.arange(0, R)
    rmask = (r < rows)[:, None]
    lanes = tl.arange(0, CH)[None, :]
    offs = r.to(tl.int64)[:, None] * n + lanes
    # data are shifted by each row's first element so the running means stay small (no cancellation)
    shift = _load_sum_keep(x_ptr, res_ptr, r.to(tl.int64) * n, r < rows)[:, None]
    mean = tl.zeros([R, CH], dtype=tl.float32)
    m2 = tl.zeros([R, CH], dtype=tl.float32)
    nfull = n // CH
    for i in range(0, nfull):
        v = _load_sum_keep(x_ptr, res_ptr, offs + i * CH, rmask) - shift
        d = v - mean
        mean += d * (1.0 / (i + 1))
        m2 += d * (v - mean)
    # ragged tail: lanes past the end keep nfull samples
    tail = (nfull * CH + lanes) < n
    tmask = rmask & tail
    v = _load_sum_keep(x_ptr, res_ptr, offs + nfull * CH, tmask) - shift
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
        v += tl.load(res_ptr + offs + start, mask=mask, other=0.0, eviction_policy="evict_first")
        w = tl.load(w_ptr + cols, mask=cmask, eviction_policy="evict_last")
        b = tl.load(b_ptr + cols, mask=cmask, eviction_policy="evict_last")
        tl.store(out_ptr + offs + start, (v - shift - mu) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        x, residual = x.contiguous(), residual.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        rows = x.numel() // n
        ch = min(TILE, triton.next_power_of_2(n))
        r = TILE // ch
        ln = self.layer_norm
        add_layernorm_kernel[(triton.cdiv(rows, r),)](
            x, residual, ln.weight, ln.bias, out, rows, n, ln.eps, R=r, CH=ch, num_warps=8
        )
        return out
