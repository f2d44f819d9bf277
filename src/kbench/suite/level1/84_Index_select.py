"""torch.index_select of rows: out[i] = x[index[i]], with repeated and unordered indices."""

import torch
import torch.nn as nn

num_rows = 65536
dim = 2048
num_indices = 262144

KBENCH_PRESETS = {"small": {"num_rows": 97, "dim": 40, "num_indices": 131}}
KBENCH_TAGS = ["gather"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, 0, index)


def get_inputs():
    return [torch.randn(num_rows, dim), torch.randint(0, num_rows, (num_indices,))]


def get_init_inputs():
    return []
