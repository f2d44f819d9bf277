"""Depthwise 3x3 convolution, BatchNorm with batch statistics, then ReLU6."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 48
channels = 256
height = 112
width = 112
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 16, "height": 15, "width": 15}}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(
            channels, channels, kernel_size, padding=kernel_size // 2, groups=channels, bias=False
        )
        self.batch_norm = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu6(self.batch_norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
