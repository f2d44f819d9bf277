"""Rotary position embeddings (rotate-half form) on q and k, forward and backward, one Triton kernel per
pass for both tensors.

Forward: each program takes a block of (batch, head, position) rows of q and of k (HALF_TILE floats per
half-row tile), loads the cos/sin rows of those positions once for both, and writes out = x * cos +
rotate_half(x) * sin from the two halves of each row held in registers: q and k are read once and each
output written once. Eager materialises rotate_half (a negation and a cat), then two products and a sum,
for q and k separately: several full-size temporaries per tensor.

Backward: the inverse rotation dx = dout * cos + rotate_half^T(dout * sin), i.e. dx1 = d1 * c1 + d2 * s2
and dx2 = d2 * c2 - d1 * s1 on the halves, again one read of each upstream gradient and one write of each
input gradient in a single launch. Nothing but the (seq, head_dim) tables is saved.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

HALF_TILE = 2048  # floats of each half-row tile per program


@triton.jit
def rope_kernel(
    a_ptr, b_ptr, oa_ptr, ob_ptr, cos_ptr, sin_ptr, rows, n_pos, half,
    BLOCK_R: tl.constexpr, BLOCK_H: tl.constexpr, BACKWARD: tl.constexpr, TWO: tl.constexpr,
):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    c = tl.arange(0, BLOCK_H)[None, :]
    mask = (r < rows)[:, None] & (c < half)
    d = 2 * half
    x_off = r.to(tl.int64)[:, None] * d + c
    t_off = (r % n_pos).to(tl.int64)[:, None] * d + c
    c1 = tl.load(cos_ptr + t_off, mask=mask, other=0.0)
    c2 = tl.load(cos_ptr + t_off + half, mask=mask, other=0.0)
    s1 = tl.load(sin_ptr + t_off, mask=mask, other=0.0)
    s2 = tl.load(sin_ptr + t_off + half, mask=mask, other=0.0)
    x1 = tl.load(a_ptr + x_off, mask=mask, other=0.0)
    x2 = tl.load(a_ptr + x_off + half, mask=mask, other=0.0)
    if BACKWARD:
        tl.store(oa_ptr + x_off, x1 * c1 + x2 * s2, mask=mask)
        tl.store(oa_ptr + x_off + half, x2 * c2 - x1 * s1, mask=mask)
    else:
        tl.store(oa_ptr + x_off, x1 * c1 - x2 * s1, mask=mask)
        tl.store(oa_ptr + x_off + half, x2 * c2 + x1 * s2, mask=mask)
    if TWO:
        y1 = tl.load(b_ptr + x_off, mask=mask, other=0.0)
        y2 = tl.load(b_ptr + x_off + half, mask=mask, other=0.0)
        if BACKWARD:
            tl.store(ob_ptr + x_off, y1 * c1 + y2 * s2, mask=mask)
            tl.store(ob_ptr + x_off + half, y2 * c2 - y1 * s1, mask=mask)
        else:
            tl.store(ob_ptr + x_off, y1 * c1 - y2 * s1, mask=mask)
            tl.store(ob_ptr + x_off + half, y2 * c2 + y1 * s2, mask=mask)


def _rotate(a, b, cos, sin, backward):
    """Rotated copies of a and b (the inverse rotation when backward), in one launch where their shapes
    match."""
    a, b = a.contiguous(), b.contiguous()
    d = a.shape[-1]
    half = d // 2
    n_pos = cos.numel() // d
    oa, ob = torch.empty_like(a), torch.empty_like(b)
    block_h = triton.next_power_of_2(half)
    pairs = [(a, b, oa, ob, True)] if a.shape == b.shape else [(a, a, oa, oa, False), (b, b, ob, ob, False)]
    for x, y, ox, oy, two in pairs:
        rows = x.numel() // d
        block_r = min(max(1, HALF_TILE // block_h), triton.next_power_of_2(rows))
        rope_kernel[(triton.cdiv(rows, block_r),)](
            x, y, ox, oy, cos, sin, rows, n_pos, half,
            BLOCK_R=block_r, BLOCK_H=block_h, BACKWARD=backward, TWO=two, num_warps=8,
        )
    return oa, ob


class RoPE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, cos, sin):
        d = q.shape[-1]
        cos = cos.reshape(-1, d).contiguous()
        sin = sin.reshape(-1, d).contiguous()
        ctx.save_for_backward(cos, sin)
        return _rotate(q, k, cos, sin, False)

    @staticmethod
    def backward(ctx, dq, dk):
        cos, sin = ctx.saved_tensors
        dq_in, dk_in = _rotate(dq, dk, cos, sin, True)
        return dq_in, dk_in, None, None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        return RoPE.apply(q, k, cos, sin)
