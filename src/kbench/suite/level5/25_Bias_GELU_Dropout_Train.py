"""Bias add, exact GELU and dropout, forward and backward: y = dropout(gelu(x + b)).

The dropout mask comes from an input of uniform numbers u: an element is kept where u >= p and scaled by
1/(1-p). A training step: the gradients of x and of the bias b from an upstream gradient dy (the last
input)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 16384 tokens x 4096: 256 MiB per tensor (x, u, dy, y, dx).
num_tokens = 16384
dim = 4096
p = 0.1

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 200}}
KBENCH_TAGS = ["training", "elementwise-chain", "activation", "dropout"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, p: float):
        super().__init__()
        self.bias = nn.Parameter(0.5 * torch.randn(dim))
        self.p = p

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        h = F.gelu(x + self.bias)
        return h * (u >= self.p).to(h.dtype) / (1.0 - self.p)


def get_inputs():
    shape = (num_tokens, dim)
    # dy scaled by 1/sqrt(tokens), as a loss averaged over the tokens scales it: the bias gradient, a sum
    # over the tokens, stays O(1) and is judged relative to its own scale (compare.py's floor is
    # min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where it nears 0
    return [torch.randn(shape), torch.rand(shape), torch.randn(shape) / num_tokens**0.5]


def get_init_inputs():
    return [dim, p]
