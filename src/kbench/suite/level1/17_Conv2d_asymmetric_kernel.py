"""2D convolution with an asymmetric 3x7 kernel and matching asymmetric padding on a wide input."""

import torch
import torch.nn as nn

batch_size = 24
in_channels = 32
out_channels = 64
height = 128
width = 512
kernel_h = 3
kernel_w = 7

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 6, "height": 11, "width": 37}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_h: int, kernel_w: int):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, (kernel_h, kernel_w), padding=(kernel_h // 2, kernel_w // 2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_h, kernel_w]
