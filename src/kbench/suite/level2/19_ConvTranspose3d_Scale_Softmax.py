"""Strided 3D transposed convolution, scaling, then softmax over channels."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
depth = 16
height = 48
width = 48
kernel_size = 3
stride = 2
padding = 1
scale = 2.0

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "depth": 4, "height": 8, "width": 8}
}
KBENCH_TAGS = ["conv-epilogue", "softmax"]


class Model(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, scale: float
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.conv_transpose(x) * self.scale, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scale]
