"""2D convolution with reflect padding (padding_mode="reflect"), 3x3, keeping the spatial size."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 64
height = 256
width = 256
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 5, "height": 19, "width": 22}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, padding=kernel_size // 2, padding_mode="reflect"
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
