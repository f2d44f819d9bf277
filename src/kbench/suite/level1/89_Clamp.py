"""torch.clamp(x, lo, hi) with per-column lower and upper bound tensors broadcast over rows."""

import torch
import torch.nn as nn

batch_size = 6144
dim = 65536

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 261}}
KBENCH_TAGS = ["elementwise"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, min=lo, max=hi)


def get_inputs():
    return [torch.randn(batch_size, dim), -torch.rand(dim), torch.rand(dim)]


def get_init_inputs():
    return []
