"""2D convolution, ELU, then adaptive max pooling to 8x8, flattened."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
output_size = 8

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 3,
        "out_channels": 16,
        "height": 21,
        "width": 19,
        "output_size": 4,
    }
}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, output_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.output_size = output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_max_pool2d(F.elu(self.conv(x)), self.output_size).flatten(1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, output_size]
