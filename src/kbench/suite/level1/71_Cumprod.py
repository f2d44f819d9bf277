"""Inclusive prefix product (torch.cumprod) of factors close to 1 along rows of length 4096."""

import torch
import torch.nn as nn

batch_size = 65536
length = 4096
scan_dim = 1

KBENCH_PRESETS = {"small": {"batch_size": 8, "length": 517}}
KBENCH_TAGS = ["scan"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=self.dim)


def get_inputs():
    return [1.0 + 0.01 * torch.randn(batch_size, length)]


def get_init_inputs():
    return [scan_dim]
