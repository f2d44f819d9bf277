"""Product over dimension 1 (64 factors in [0.5, 1.5)) of a 3D tensor."""

import torch
import torch.nn as nn

batch_size = 16384
dim1 = 64
dim2 = 1024
reduce_dim = 1

KBENCH_PRESETS = {"small": {"batch_size": 4, "dim1": 64, "dim2": 1031}}
KBENCH_TAGS = ["reduction"]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.prod(x, dim=self.dim)


def get_inputs():
    return [torch.rand(batch_size, dim1, dim2).add_(0.5)]


def get_init_inputs():
    return [reduce_dim]
