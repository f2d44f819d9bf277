"""Dropout, residual add and LayerNorm, forward and backward: y = layernorm(residual + dropout(x)).

The dropout mask comes from an input of uniform numbers u: an element of x is kept where u >= p and
scaled by 1/(1-p). A training step: the gradients of x, residual and the LayerNorm's weight and bias from
an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 8192 x 4096 tokens: 128 MiB per tensor (x, residual, u, dy, y, dx, dresidual).
num_tokens = 8192
dim = 4096
p = 0.1
eps = 1e-5

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 200}}
KBENCH_TAGS = ["training", "dropout", "residual", "norm"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0, 1]}


class Model(nn.Module):
    def __init__(self, dim: int, p: float, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.p = p
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        h = residual + x * (u >= self.p).to(x.dtype) / (1.0 - self.p)
        return F.layer_norm(h, (h.shape[-1],), self.weight, self.bias, self.eps)


def get_inputs():
    shape = (num_tokens, dim)
    # dy scaled by 1/sqrt(tokens), as a loss averaged over the tokens scales it: the weight and bias
    # gradients, sums over the tokens, stay O(1) and are judged relative to their own scale (compare.py's
    # floor is min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where one nears 0
    dy = torch.randn(shape) / num_tokens**0.5
    return [torch.randn(shape), torch.randn(shape), torch.rand(shape), dy]


def get_init_inputs():
    return [dim, p, eps]
