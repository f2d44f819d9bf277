"""2D convolution, elementwise minimum with a constant, learned bias, then scaling."""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 64
height = 128
width = 128
kernel_size = 3
constant = 0.5
scale = 2.0
bias_shape = (out_channels, 1, 1)

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "height": 18, "width": 18}}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        constant: float,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.constant = constant
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.clamp(self.conv(x), max=self.constant) + self.bias) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, constant, scale, bias_shape]
