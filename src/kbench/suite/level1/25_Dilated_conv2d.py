"""Dilated 2D convolution: 3x3 kernel with dilation 2 and padding 2, keeping the spatial size."""

import torch
import torch.nn as nn

batch_size = 24
in_channels = 64
out_channels = 64
height = 256
width = 256
kernel_size = 3
dilation = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 4, "out_channels": 6, "height": 18, "width": 21}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, dilation: int):
        super().__init__()
        pad = dilation * (kernel_size - 1) // 2
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=pad, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, dilation]
