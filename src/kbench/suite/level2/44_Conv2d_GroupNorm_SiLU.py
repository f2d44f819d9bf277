"""2D convolution, GroupNorm, then SiLU (the diffusion U-Net block pattern)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
num_groups = 32

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 3,
        "out_channels": 16,
        "height": 17,
        "width": 17,
        "num_groups": 4,
    }
}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.group_norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
