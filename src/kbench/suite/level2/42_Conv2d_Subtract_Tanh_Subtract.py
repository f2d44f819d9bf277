"""2D convolution, subtract a constant, tanh, subtract another constant."""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 64
height = 128
width = 128
kernel_size = 3
subtract1 = 0.5
subtract2 = 0.2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "height": 16, "width": 21}}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, subtract1: float, subtract2: float
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.subtract1 = subtract1
        self.subtract2 = subtract2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x) - self.subtract1) - self.subtract2


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, subtract1, subtract2]
