"""2D convolution, HardSwish, then multiplication by a constant scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
in_channels = 64
out_channels = 64
height = 128
width = 128
kernel_size = 3
scale = 0.5

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 3,
        "out_channels": 16,
        "height": 16,
        "width": 20,
        "kernel_size": 3,
    }
}
KBENCH_TAGS = ["conv-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.conv(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale]
