"""A linear layer with a residual and a LayerNorm, forward and backward: y = layernorm(x + linear(x)).

A training step: the gradients of x, of the linear's weight and bias and of the LayerNorm's weight and
bias from an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 4096 tokens x 2048: a 2048 x 2048 GEMM, ~3.4e10 FLOP forward, twice that backward.
num_tokens = 4096
dim = 2048
eps = 1e-5

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 96}}
KBENCH_TAGS = ["training", "gemm-epilogue", "residual", "norm"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(dim, dim)
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.norm_bias = nn.Parameter(0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.linear(x)
        return F.layer_norm(h, (h.shape[-1],), self.norm_weight, self.norm_bias, self.eps)


def get_inputs():
    # dy scaled by 1/sqrt(tokens), as a loss averaged over the tokens scales it: the weight and bias
    # gradients, sums over the tokens, stay O(1) and are judged relative to their own scale (compare.py's
    # floor is min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where one nears 0
    return [torch.randn(num_tokens, dim), torch.randn(num_tokens, dim) / num_tokens**0.5]


def get_init_inputs():
    return [dim, eps]
