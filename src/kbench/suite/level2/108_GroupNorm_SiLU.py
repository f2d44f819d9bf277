"""GroupNorm followed by SiLU on an NCHW activation (diffusion U-Net normalization)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 48
channels = 256
height = 128
width = 128
num_groups = 32

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 16, "height": 15, "width": 17, "num_groups": 4}}
KBENCH_TAGS = ["norm-act"]


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.group_norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.group_norm(x))


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
