"""Dilated 3x3 convolution plus its input (residual), then GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
channels = 64
height = 128
width = 128
dilation = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 8, "height": 17, "width": 23}}
KBENCH_TAGS = ["conv-epilogue", "residual"]


class Model(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.conv(x) + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, dilation]
