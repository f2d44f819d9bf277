"""torch.gather along dimension 1: out[i, j] = x[i, index[i, j]]."""

import torch
import torch.nn as nn

batch_size = 8192
dim = 32768
num_gathered = 16384

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 211, "num_gathered": 257}}
KBENCH_TAGS = ["gather"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.gather(x, 1, index)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, dim, (batch_size, num_gathered))]


def get_init_inputs():
    return []
