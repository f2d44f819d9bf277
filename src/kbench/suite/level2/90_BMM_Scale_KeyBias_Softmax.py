"""Batched matmul scores, scaling, an additive per-key bias (padding-mask style), then softmax."""

import torch
import torch.nn as nn

batch_size = 32
m = 1024
k = 1024
n = 1024
scale = 0.03125

KBENCH_PRESETS = {"small": {"batch_size": 3, "m": 33, "k": 40, "n": 48}}
KBENCH_TAGS = ["gemm-epilogue", "softmax"]


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, a: torch.Tensor, b: torch.Tensor, key_bias: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.bmm(a, b) * self.scale + key_bias, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n), torch.randn(batch_size, 1, n)]


def get_init_inputs():
    return [scale]
