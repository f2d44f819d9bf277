"""Pointwise (1x1) 2D convolution: a per-pixel channel-mixing GEMM."""

import torch
import torch.nn as nn

batch_size = 48
in_channels = 256
out_channels = 256
height = 128
width = 128

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 12, "out_channels": 20, "height": 15, "width": 17}
}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels]
