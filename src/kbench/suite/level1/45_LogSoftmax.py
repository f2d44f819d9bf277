"""Log-softmax over dimension 1 of a (batch, dim) matrix."""

import torch
import torch.nn as nn

batch_size = 12288
dim = 32768

KBENCH_PRESETS = {"small": {"batch_size": 24, "dim": 199}}
KBENCH_TAGS = ["softmax"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
