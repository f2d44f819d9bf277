"""Strided 2D transposed convolution, max pooling, hardtanh, spatial mean, then tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 64
height = 128
width = 128
kernel_size = 4
stride = 2
padding = 1

KBENCH_PRESETS = {"small": {"batch_size": 4, "in_channels": 3, "out_channels": 16, "height": 9, "width": 11}}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.hardtanh(F.max_pool2d(self.conv_transpose(x), 2), -1.0, 1.0)
        return torch.tanh(y.mean(dim=(2, 3), keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
