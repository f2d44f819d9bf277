"""LayerNorm with a learned weight and bias, forward and backward: y = (x - mean) / sqrt(var + eps) * w + b.

A training step over the last dimension: the gradients of x, of the weight and of the bias from an upstream
gradient dy (the last input).

dy is drawn at a mean loss's scale (times num_tokens^-1/2), so the gradients summed over the tokens
are O(1): at O(sqrt(num_tokens)) their fp32 rounding near zero would approach the tolerance."""

import torch
import torch.nn as nn

num_tokens = 24576
dim = 4096
eps = 1e-5

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 192}}
KBENCH_TAGS = ["training", "norm"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (self.dim,), self.weight, self.bias, self.eps)


def get_inputs():
    dy = torch.randn(num_tokens, dim) * num_tokens**-0.5  # a mean loss's scale: dw, db are O(1)
    return [0.5 + 2.0 * torch.randn(num_tokens, dim), dy]


def get_init_inputs():
    return [dim, eps]
