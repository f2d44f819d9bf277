"""C = A @ B for a 3D tensor A of shape (b, i, k) and a matrix B of shape (k, n), broadcast over b."""

import torch
import torch.nn as nn

b = 16
i = 1024
k = 2048
n = 2048

KBENCH_PRESETS = {"small": {"b": 3, "i": 37, "k": 48, "n": 41}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(b, i, k), torch.randn(k, n)]


def get_init_inputs():
    return []
