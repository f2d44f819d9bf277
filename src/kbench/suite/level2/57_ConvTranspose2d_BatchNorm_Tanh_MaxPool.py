"""Bias-free strided 2D transposed convolution, BatchNorm with batch statistics, tanh, then max pooling."""

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

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "height": 11, "width": 9}}
KBENCH_TAGS = ["conv-epilogue", "norm-act", "pool-epilogue"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        # no bias: training-mode BatchNorm would cancel it
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False
        )
        self.batch_norm = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.tanh(self.batch_norm(self.conv_transpose(x))), 2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
