"""LayerNorm, GELU and a residual add, forward and backward: y = gelu(layernorm(x) * w + b) + x.

A training step: the gradients of x (through the norm and through the skip connection), of the norm's
weight and of its bias from an upstream gradient dy (the last input). GELU is the exact (erf) one.

dy is drawn at a mean loss's scale (times num_tokens^-1/2), so the gradients summed over the tokens
are O(1): at O(sqrt(num_tokens)) their fp32 rounding near zero would approach the tolerance."""

import torch
import torch.nn as nn

num_tokens = 12288
dim = 4096
eps = 1e-5

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 160}}
KBENCH_TAGS = ["training", "norm-act", "residual"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)
        return torch.nn.functional.gelu(h) + x


def get_inputs():
    dy = torch.randn(num_tokens, dim) * num_tokens**-0.5  # a mean loss's scale: dw, db are O(1)
    return [torch.randn(num_tokens, dim), dy]


def get_init_inputs():
    return [dim, eps]
