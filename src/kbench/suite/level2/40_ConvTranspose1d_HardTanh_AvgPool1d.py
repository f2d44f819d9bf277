"""Strided 1D transposed convolution, hardtanh to [-0.5, 0.5], then average pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 256
out_channels = 128
length = 8192
kernel_size = 4
stride = 2
padding = 1
pool_size = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 8, "out_channels": 6, "length": 33}}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue"]


class Model(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, pool_size: int
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool1d(F.hardtanh(self.conv_transpose(x), -0.5, 0.5), self.pool_size)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, pool_size]
