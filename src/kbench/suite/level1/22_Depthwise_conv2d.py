"""Depthwise 2D convolution (groups == channels), 3x3 with padding 1: memory-bound per-channel stencils."""

import torch
import torch.nn as nn

# 16 x 96 x 512 x 512 fp32 = 1.5 GiB in and 1.5 GiB out.
batch_size = 16
channels = 96
height = 512
width = 512
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 5, "height": 21, "width": 19}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
