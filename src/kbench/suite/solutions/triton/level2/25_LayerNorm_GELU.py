"""LayerNorm + erf GELU: one Triton program per row. Rows up to 16384 floats are loaded once and kept in
registers (statistics, normalize, affine and GELU from one read: 2 bytes moved per byte of output, the
minimum); longer rows fall back to a centered two-pass loop whose re-reads hit L2 (eager: layer_norm +
gelu, two full read+write passes)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

MAX_ROW_BLOCK = 16384  # 32 floats per thread at 16 warps; above this registers spill


@triton.jit
def _gelu_affine(v, mean, rstd, w_ptr, b_ptr, cols, mask):
    v = (v - mean) * rstd * tl.load(w_ptr + cols, mask=mask) + tl.load(b_ptr + cols, mask=mask)
    return 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))


@triton.jit
def layernorm_gelu_kernel(x_ptr, w_ptr, b_ptr, out_ptr, n, eps, BLOCK: tl.constexpr, ROW_IN_REGS: tl.constexpr):
    off = tl.program_id(0).to(tl.int64) * n
    if ROW_IN_REGS:
        cols = tl.arange(0, BLOCK)
        mask = cols < n
        v = tl.load(x_ptr + off + cols, mask=mask, other=0.0)
        mean = tl.sum(v, axis=0) / n
        d = tl.where(mask, v - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
        tl.store(out_ptr + off + cols, _gelu_affine(v, mean, rstd, w_ptr, b_ptr, cols, mask), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + off + cols, mask=cols < n, other=0.0)
        mean = tl.sum(acc, axis=0) / n
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            d = tl.where(mask, tl.load(x_ptr + off + cols, mask=mask) - mean, 0.0)
            acc += d * d
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n + eps)
        for start in range(0, n, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n
            v = tl.load(x_ptr + off + cols, mask=mask)
            tl.store(out_ptr + off + cols, _gelu_affine(v, mean, rstd, w_ptr, b_ptr, cols, mask), mask=mask)


def row_launch(n: int) -> dict:
    """Block size, path and warps for a row of n floats."""
    block = triton.next_power_of_2(n)
    if block > MAX_ROW_BLOCK:
        return {"BLOCK": 2048, "ROW_IN_REGS": False, "num_warps": 8}
    return {"BLOCK": block, "ROW_IN_REGS": True, "num_warps": max(4, min(16, block // 512))}


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.shape[-1]
        ln = self.layer_norm
        layernorm_gelu_kernel[(x.numel() // n,)](x, ln.weight, ln.bias, out, n, ln.eps, **row_launch(n))
        return out
