# expect: static_reject static:try-fallback
# Falls back to PyTorch when the launch fails.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0  # tanh(z) = 2 sigmoid(2z) - 1
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


def gelu_tanh(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    gelu_tanh_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        try:
            return gelu_tanh(x)
        except Exception:
            return torch.nn.functional.gelu(x, approximate="tanh")
