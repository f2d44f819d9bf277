"""Depthwise-separable convolution: a 3x3 depthwise conv followed by a 1x1 pointwise conv."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
height = 256
width = 256
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 4, "out_channels": 10, "height": 17, "width": 15}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.depthwise = nn.Conv2d(
            in_channels, in_channels, kernel_size, padding=kernel_size // 2, groups=in_channels
        )
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
