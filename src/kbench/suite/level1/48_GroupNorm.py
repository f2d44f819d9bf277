"""GroupNorm with 8 groups over (batch, channels, H, W) with a learned per-channel affine transform."""

import torch
import torch.nn as nn

# Each group reduces over 16 channels * 256 * 256 = 2^20 elements.
batch_size = 32
channels = 128
height = 256
width = 256
num_groups = 8

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 12, "height": 13, "width": 17, "num_groups": 4}}
KBENCH_TAGS = ["norm"]


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
