"""Dropout with a given uniform tensor u, forward and backward, each pass one elementwise Triton kernel.

Forward: one read of x and u, one write of y = x * (u >= p) / (1 - p), the mask compared in registers.
Eager runs the comparison (writing a bool mask), the multiply (writing a temporary) and the division as
three kernels, each one a full pass over memory.

Backward: the mask is not stored; the kernel reads u and dy once and writes dx = dy * (u >= p) / (1 - p).
Eager's autograd runs the division's and the multiply's backward as separate kernels over the saved mask.
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def dropout_kernel(x_ptr, u_ptr, y_ptr, n, p, keep, BLOCK: tl.constexpr):
    # y = x * (u >= p) / keep, with keep = 1 - p: used for the forward (x) and the backward (dy) alike
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    u = tl.load(u_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.where(u >= p, x, 0.0) / keep, mask=mask)


def _launch(x, u, p):
    y = torch.empty_like(x)
    n = x.numel()
    dropout_kernel[(triton.cdiv(n, BLOCK),)](x, u, y, n, p, 1.0 - p, BLOCK=BLOCK, num_warps=8)
    return y


class Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, u, p):
        u = u.contiguous()
        ctx.p = p
        ctx.save_for_backward(u)
        return _launch(x.contiguous(), u, p)

    @staticmethod
    def backward(ctx, dy):
        (u,) = ctx.saved_tensors
        return _launch(dy.contiguous(), u, ctx.p), None, None


class ModelNew(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return Dropout.apply(x, u, float(self.p))
