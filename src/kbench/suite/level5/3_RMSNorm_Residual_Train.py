"""Residual add then RMSNorm, forward and backward: h = x + residual, y = h / sqrt(mean(h^2) + eps) * w.

The forward returns both y and the new residual stream h, so the step takes two upstream gradients (dy and
dh, the last two inputs) and gives the gradients of x, of the residual and of the weight: dh flows into
both x and the residual alongside the norm's own gradient.

dy and dh are drawn at a mean loss's scale (times num_tokens^-1/2), so the weight's gradient, summed
over the tokens, is O(1): at O(sqrt(num_tokens)) its fp32 rounding near zero would approach the tolerance."""

import torch
import torch.nn as nn

num_tokens = 8192
dim = 4096
eps = 1e-6

KBENCH_PRESETS = {"small": {"num_tokens": 96, "dim": 128}}
KBENCH_TAGS = ["training", "norm", "residual"]
KBENCH_TRAINING = {"upstream": 2, "grad_inputs": [0, 1]}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = x + residual
        y = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
        return y, h


def get_inputs():
    shape = (num_tokens, dim)
    scale = num_tokens**-0.5  # upstream gradients at a mean loss's scale: dw is O(1)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape) * scale, torch.randn(shape) * scale]


def get_init_inputs():
    return [dim, eps]
