"""Transposed 1D convolution that doubles the sequence length (kernel 4, stride 2)."""

import torch
import torch.nn as nn

batch_size = 48
in_channels = 128
out_channels = 64
length = 16384
kernel_size = 4
stride = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 8, "out_channels": 6, "length": 257}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.conv_t = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_t(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
