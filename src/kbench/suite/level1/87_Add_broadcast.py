"""x + y where y (seq_len, hidden) broadcasts over the batch dimension of x."""

import torch
import torch.nn as nn

batch_size = 24
seq_len = 4096
hidden = 4096

KBENCH_PRESETS = {"small": {"batch_size": 3, "seq_len": 29, "hidden": 67}}
KBENCH_TAGS = ["elementwise"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden), torch.randn(seq_len, hidden)]


def get_init_inputs():
    return []
