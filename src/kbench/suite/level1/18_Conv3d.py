"""3D convolution with a cubic 3x3x3 kernel over a volume."""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 16
out_channels = 32
depth = 64
height = 64
width = 64
kernel_size = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 4, "depth": 7, "height": 11, "width": 13}
}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
