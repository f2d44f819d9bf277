"""C = A @ B with A of shape (M, K) and B of shape (K, N), all three sizes different."""

import torch
import torch.nn as nn

M = 2048
K = 4096
N = 3072

KBENCH_PRESETS = {"small": {"M": 48, "K": 96, "N": 80}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
