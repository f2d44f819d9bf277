"""3D max pooling with a 3x3x3 window, stride 2 and padding 1."""

import torch
import torch.nn as nn

batch_size = 8
channels = 32
depth = 128
height = 128
width = 128

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 3, "depth": 9, "height": 17, "width": 15}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool3d(kernel_size=3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return []
