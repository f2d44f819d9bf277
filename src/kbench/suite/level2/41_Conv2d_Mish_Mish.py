"""2D convolution followed by Mish applied twice."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 48
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 19, "width": 17}}
KBENCH_TAGS = ["conv-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.mish(F.mish(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
