"""2D convolution with a square 3x3 kernel, no padding, no bias."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
height = 256
width = 256
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 19, "width": 23}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
