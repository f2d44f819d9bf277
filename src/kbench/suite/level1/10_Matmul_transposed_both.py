"""C = A.T @ B.T with A stored as (K, M) and B stored as (N, K)."""

import torch
import torch.nn as nn

M = 4096
K = 3072
N = 4096

KBENCH_PRESETS = {"small": {"M": 48, "K": 65, "N": 52}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B.T)


def get_inputs():
    return [torch.randn(K, M), torch.randn(N, K)]


def get_init_inputs():
    return []
