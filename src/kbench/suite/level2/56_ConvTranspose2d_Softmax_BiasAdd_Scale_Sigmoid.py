"""Strided 2D transposed convolution, softmax over channels, learned bias, scaling, then sigmoid."""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 32
height = 128
width = 128
kernel_size = 4
stride = 2
padding = 1
scale = 2.0
bias_shape = (out_channels, 1, 1)

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 10, "width": 12}}
KBENCH_TAGS = ["conv-epilogue", "softmax"]


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid((torch.softmax(self.conv_transpose(x), dim=1) + self.bias) * self.scale)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, scale, bias_shape]
