"""3x3 convolution (stride 1, no padding, with bias) followed by ReLU: a conv with an elementwise epilogue."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
height = 64
width = 64
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "height": 12, "width": 12}}
KBENCH_TAGS = ["conv-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
