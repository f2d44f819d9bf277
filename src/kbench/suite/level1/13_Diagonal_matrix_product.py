"""C = diag(a) @ B: eager builds the dense diagonal matrix; a row scaling computes the same thing."""

import torch
import torch.nn as nn

N = 4096
M = 8192

KBENCH_PRESETS = {"small": {"N": 67, "M": 93}}
KBENCH_TAGS = ["matmul"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.diag(a) @ B


def get_inputs():
    return [torch.randn(N), torch.randn(N, M)]


def get_init_inputs():
    return []
