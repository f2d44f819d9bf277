"""RMSNorm with a learned scale, forward and backward: y = x / sqrt(mean(x^2) + eps) * weight.

A training step: the gradients of x and of weight from an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn

num_tokens = 8192
dim = 4096
eps = 1e-6

KBENCH_PRESETS = {"small": {"num_tokens": 64, "dim": 96}}
KBENCH_TAGS = ["training", "norm"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    return [torch.randn(num_tokens, dim), torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, eps]
