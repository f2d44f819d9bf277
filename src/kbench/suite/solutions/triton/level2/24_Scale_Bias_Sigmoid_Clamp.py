"""Per-feature scale and bias, sigmoid, clamp to [0.1, 0.9]: one Triton kernel instead of four passes
(eager: mul + add + sigmoid + clamp). A 2-D grid of (row block, column block) tiles gives the feature index
without a per-element modulo, and each program loads its scale/bias slice once for all of its rows."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_ROWS = 8
BLOCK_COLS = 1024  # 8 x 1024 floats per program: 32 per thread at 8 warps


@triton.jit
def scale_bias_sigmoid_clamp_kernel(
    x_ptr, s_ptr, b_ptr, out_ptr, rows, dim, BR: tl.constexpr, BC: tl.constexpr
):
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    cmask = cols < dim
    s = tl.load(s_ptr + cols, mask=cmask)
    b = tl.load(b_ptr + cols, mask=cmask)
    offs = r.to(tl.int64)[:, None] * dim + cols[None, :]
    mask = (r < rows)[:, None] & cmask[None, :]
    v = tl.load(x_ptr + offs, mask=mask) * s[None, :] + b[None, :]
    tl.store(out_ptr + offs, tl.minimum(tl.maximum(tl.sigmoid(v), 0.1), 0.9), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        dim = x.shape[-1]
        rows = x.numel() // dim
        bc = min(BLOCK_COLS, triton.next_power_of_2(dim))
        br = BLOCK_ROWS * (BLOCK_COLS // bc)  # short rows: more of them per program
        # row blocks on axis 0 (up to 2**31 - 1), column blocks on axis 1 (up to 65535)
        grid = (triton.cdiv(rows, br), triton.cdiv(dim, bc))
        scale_bias_sigmoid_clamp_kernel[grid](
            x, self.scale, self.bias, out, rows, dim, BR=br, BC=bc, num_warps=8
        )
        return out
