"""L1 norm (sum of absolute values) of each row along dimension 1."""

import torch
import torch.nn as nn

# Reductions only read: 2^29 fp32 elements (2 GiB) so one pass is ~0.6 ms on an H100.
batch_size = 320
dim1 = 4096
dim2 = 1024
reduce_dim = 1

KBENCH_PRESETS = {"small": {"batch_size": 4, "dim1": 37, "dim2": 1031}}
KBENCH_TAGS = ["reduction"]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.vector_norm(x, ord=1, dim=self.dim)


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
