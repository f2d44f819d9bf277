"""Strided 3D transposed convolution, SiLU, GroupNorm, then HardSwish."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
in_channels = 32
out_channels = 64
depth = 16
height = 32
width = 32
kernel_size = 3
stride = 2
padding = 1
num_groups = 8

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 3,
        "out_channels": 8,
        "depth": 4,
        "height": 6,
        "width": 6,
        "num_groups": 4,
    }
}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 5e-4}


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        num_groups: int,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardswish(self.group_norm(F.silu(self.conv_transpose(x))))


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, num_groups]
