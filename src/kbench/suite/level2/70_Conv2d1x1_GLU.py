"""Pointwise (1x1) convolution to twice the channels, then a gated linear unit over channels."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 256
height = 128
width = 128

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 16, "height": 13, "width": 19}}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, 2 * channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.conv(x), dim=1)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
