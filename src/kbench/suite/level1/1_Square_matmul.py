"""C = A @ B for two square fp32 matrices."""

import torch
import torch.nn as nn

N = 4096

KBENCH_PRESETS = {"small": {"N": 67}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(N, N), torch.randn(N, N)]


def get_init_inputs():
    return []
