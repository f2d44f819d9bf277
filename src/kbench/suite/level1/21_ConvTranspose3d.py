"""Transposed 3D convolution doubling each spatial size (kernel 3, stride 2, padding 1, output padding 1)."""

import torch
import torch.nn as nn

# 2 * 8 * 64 * 48^3 * 32 * 27 = 9.8e10 FLOP; the 8 x 32 x 96^3 fp32 output is 864 MiB.
batch_size = 8
in_channels = 64
out_channels = 32
depth = 48
height = 48
width = 48
kernel_size = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 4, "out_channels": 3, "depth": 5, "height": 7, "width": 9}
}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv_t = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=2, padding=1, output_padding=1
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_t(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
