"""C = A * s: a matrix scaled by a scalar held in a 0-d tensor."""

import torch
import torch.nn as nn

M = 24576
N = 16384

KBENCH_PRESETS = {"small": {"M": 61, "N": 127}}
KBENCH_TAGS = ["matmul", "elementwise"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        return A * s


def get_inputs():
    return [torch.randn(M, N), torch.randn(())]


def get_init_inputs():
    return []
