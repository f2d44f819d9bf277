"""torch.where(x > 0, x, y): select from two tensors by a condition on the first."""

import torch
import torch.nn as nn

batch_size = 4096
dim = 65536

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 259}}
KBENCH_TAGS = ["elementwise"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, y)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
