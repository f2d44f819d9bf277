"""Adaptive average pooling to a 7x7 output from a size that 7 does not divide (uneven windows)."""

import torch
import torch.nn as nn

batch_size = 192
channels = 256
height = 130
width = 130
output_size = 7

KBENCH_PRESETS = {"small": {"batch_size": 4, "channels": 16, "height": 23, "width": 19}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self, output_size: int):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [output_size]
