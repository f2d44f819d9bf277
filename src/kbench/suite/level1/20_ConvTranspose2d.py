"""Transposed 2D convolution upsampling by 2 (kernel 4, stride 2, padding 1), as in decoder networks."""

import torch
import torch.nn as nn

batch_size = 24
in_channels = 128
out_channels = 64
height = 128
width = 128
kernel_size = 4
stride = 2
padding = 1

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 6, "out_channels": 4, "height": 13, "width": 17}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_t = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_t(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
