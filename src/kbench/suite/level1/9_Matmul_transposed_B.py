"""C = A @ B.T where B is stored as (N, K), as in a linear layer's weight."""

import torch
import torch.nn as nn

M = 4096
K = 4096
N = 3072

KBENCH_PRESETS = {"small": {"M": 56, "K": 72, "N": 40}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


def get_inputs():
    return [torch.randn(M, K), torch.randn(N, K)]


def get_init_inputs():
    return []
