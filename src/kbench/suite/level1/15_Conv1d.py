"""1D convolution over a long sequence: nn.Conv1d with kernel size 3 and same-length padding."""

import torch
import torch.nn as nn

batch_size = 48
in_channels = 64
out_channels = 128
length = 32768
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 5, "out_channels": 12, "length": 301}}
KBENCH_TAGS = ["conv"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
