"""Strided 2D convolution: 5x5 kernel, stride 2, padding 2, halving each spatial size."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 256
width = 256
kernel_size = 5
stride = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 33, "width": 29}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
