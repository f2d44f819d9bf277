"""2D average pooling with a 2x2 window and stride 2."""

import torch
import torch.nn as nn

batch_size = 32
channels = 64
height = 512
width = 512

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 4, "height": 38, "width": 42}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
