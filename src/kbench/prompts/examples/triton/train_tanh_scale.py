import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    return 2.0 / (1.0 + tl.exp(-2.0 * x)) - 1.0


@triton.jit
def forward_kernel(x_ptr, s_ptr, y_ptr, t_ptr, rows, d, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)[None, :]
    mask = (r < rows) & (c < d)
    t = _tanh(tl.load(x_ptr + r * d + c, mask=mask).to(tl.float32))
    s = tl.load(s_ptr + c, mask=c < d)
    tl.store(t_ptr + r * d + c, t, mask=mask)
    tl.store(y_ptr + r * d + c, t * s, mask=mask)


@triton.jit
def backward_kernel(
    dy_ptr, t_ptr, s_ptr, dx_ptr, part_ptr, rows, d, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr
):
    # dx = dy * scale * (1 - t^2) for this tile; the tile's column sums of dy * t go to its row of partials
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)[:, None]
    c = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)[None, :]
    mask = (r < rows) & (c < d)
    g = tl.load(dy_ptr + r * d + c, mask=mask, other=0.0)
    t = tl.load(t_ptr + r * d + c, mask=mask, other=0.0)
    s = tl.load(s_ptr + c, mask=c < d)
    tl.store(dx_ptr + r * d + c, g * s * (1.0 - t * t), mask=mask)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    tl.store(part_ptr + tl.program_id(0) * d + cols, tl.sum(g * t, axis=0), mask=cols < d)


@triton.jit
def column_sum_kernel(part_ptr, out_ptr, parts, d, BLOCK_D: tl.constexpr):
    cols = tl.program_id(0) * BLOCK_D + tl.arange(0, BLOCK_D)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)
    for p in range(0, parts):
        acc += tl.load(part_ptr + p * d + cols, mask=cols < d, other=0.0)
    tl.store(out_ptr + cols, acc, mask=cols < d)


BLOCK_R, BLOCK_D = 32, 128


class TanhScale(torch.autograd.Function):
    """Both passes in our own kernels: forward saves tanh(x), backward computes dx and dscale from it."""

    @staticmethod
    def forward(ctx, x, scale):
        x = x.contiguous()
        d = scale.numel()
        rows = x.numel() // d
        y, t = torch.empty_like(x), torch.empty_like(x)
        grid = (triton.cdiv(rows, BLOCK_R), triton.cdiv(d, BLOCK_D))
        forward_kernel[grid](x, scale, y, t, rows, d, BLOCK_R=BLOCK_R, BLOCK_D=BLOCK_D)
        ctx.save_for_backward(t, scale)
        return y

    @staticmethod
    def backward(ctx, dy):
        t, scale = ctx.saved_tensors
        dy = dy.contiguous()
        d = scale.numel()
        rows = t.numel() // d
        parts = triton.cdiv(rows, BLOCK_R)
        dx = torch.empty_like(t)
        partial = torch.empty((parts, d), device=t.device, dtype=torch.float32)
        backward_kernel[(parts, triton.cdiv(d, BLOCK_D))](
            dy, t, scale, dx, partial, rows, d, BLOCK_R=BLOCK_R, BLOCK_D=BLOCK_D
        )
        dscale = torch.empty_like(scale)
        column_sum_kernel[(triton.cdiv(d, BLOCK_D),)](partial, dscale, parts, d, BLOCK_D=BLOCK_D)
        return dx, dscale


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return TanhScale.apply(x, self.scale)
