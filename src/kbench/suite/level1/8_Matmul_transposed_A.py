"""C = A.T @ B where A is stored as (K, M), so the left operand is read transposed."""

import torch
import torch.nn as nn

M = 3072
K = 4096
N = 4096

KBENCH_PRESETS = {"small": {"M": 40, "K": 72, "N": 56}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    return [torch.randn(K, M), torch.randn(K, N)]


def get_init_inputs():
    return []
