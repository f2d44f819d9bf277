"""LeakyReLU with negative slope 0.01 (constructor argument)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
seq_len = 4096
hidden = 1024
negative_slope = 0.01

KBENCH_PRESETS = {"small": {"batch_size": 3, "seq_len": 37, "hidden": 48}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [negative_slope]
