"""InstanceNorm2d with a learned affine transform: normalise each (sample, channel) plane."""

import torch
import torch.nn as nn

batch_size = 96
channels = 64
height = 256
width = 256

KBENCH_PRESETS = {"small": {"batch_size": 3, "channels": 5, "height": 19, "width": 17}}
KBENCH_TAGS = ["norm"]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.inorm = nn.InstanceNorm2d(channels, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inorm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
