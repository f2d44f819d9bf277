"""x.scatter_add(1, index, src): accumulate src into x at column index[i, j], with collisions."""

import torch
import torch.nn as nn

# Four source elements land on each destination slot on average; the int64 index is 2 GiB.
batch_size = 8192
dim = 8192
num_src = 32768

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 257, "num_src": 1031}}
KBENCH_TAGS = ["gather"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
        return x.scatter_add(1, index, src)


def get_inputs():
    return [
        torch.randn(batch_size, dim),
        torch.randint(0, dim, (batch_size, num_src)),
        torch.randn(batch_size, num_src),
    ]


def get_init_inputs():
    return []
