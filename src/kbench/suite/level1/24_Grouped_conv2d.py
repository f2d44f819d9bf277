"""Grouped 2D convolution (8 groups), 3x3 with padding 1."""

import torch
import torch.nn as nn

batch_size = 24
in_channels = 128
out_channels = 256
height = 128
width = 128
kernel_size = 3
groups = 8

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 8, "out_channels": 12, "height": 15, "width": 13, "groups": 4}
}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1, groups=groups)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
