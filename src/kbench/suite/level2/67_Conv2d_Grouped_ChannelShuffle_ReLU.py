"""Grouped 2D convolution, ShuffleNet channel shuffle, then ReLU."""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 128
out_channels = 128
height = 128
width = 128
kernel_size = 3
groups = 4

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 8, "out_channels": 16, "height": 15, "width": 17}}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, groups=groups)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        n, c, h, w = y.shape
        y = y.view(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
