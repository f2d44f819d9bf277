"""Matmul with a transposed left operand (a.T @ b), learned bias, ReLU, then the mean over rows."""

import torch
import torch.nn as nn

k = 4096
m = 4096
n = 4096

KBENCH_PRESETS = {"small": {"k": 64, "m": 48, "n": 56}}
KBENCH_TAGS = ["gemm-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(a.t(), b) + self.bias).mean(dim=0)


def get_inputs():
    return [torch.randn(k, m), torch.randn(k, n)]


def get_init_inputs():
    return [n]
