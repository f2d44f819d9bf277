"""SELU: scaled ELU with the fixed self-normalizing constants."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 65536

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 257}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.selu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
