"""2D max pooling: 3x3 window, stride 2, padding 1, dilation 1 (the ResNet stem pool)."""

import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 512
width = 512

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 4, "height": 37, "width": 41}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
