"""Inclusive prefix sum (torch.cumsum) along rows of length 32768."""

import torch
import torch.nn as nn

batch_size = 8192
length = 32768
scan_dim = 1

KBENCH_PRESETS = {"small": {"batch_size": 8, "length": 517}}
KBENCH_TAGS = ["scan"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, length)]


def get_init_inputs():
    return [scan_dim]
