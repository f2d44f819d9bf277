"""2D convolution, learned per-channel multiplier, LeakyReLU, then GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 32
out_channels = 64
height = 256
width = 256
kernel_size = 3
multiplier_shape = (out_channels, 1, 1)

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 4, "out_channels": 16, "height": 23, "width": 19}}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, multiplier_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.multiplier = nn.Parameter(1.0 + torch.randn(multiplier_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(F.leaky_relu(self.conv(x) * self.multiplier, 0.1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, multiplier_shape]
