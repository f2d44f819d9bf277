"""Batched matmul, scaling, a learned bias over the last dimension, then ReLU."""

import torch
import torch.nn as nn

batch_size = 32
m = 1024
k = 1024
n = 1024
scale = 0.125

KBENCH_PRESETS = {"small": {"batch_size": 3, "m": 33, "k": 40, "n": 48}}
KBENCH_TAGS = ["gemm-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, n: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.bmm(a, b) * self.scale + self.bias)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return [n, scale]
