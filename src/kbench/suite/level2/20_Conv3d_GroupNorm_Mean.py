"""3D convolution, GroupNorm, then the mean over channels and space per sample."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
kernel_size = 3
num_groups = 8

KBENCH_PRESETS = {
    "small": {
        "batch_size": 4,
        "in_channels": 3,
        "out_channels": 16,
        "depth": 6,
        "height": 10,
        "width": 10,
        "kernel_size": 3,
        "num_groups": 4,
    }
}
KBENCH_TAGS = ["conv-epilogue", "norm-act", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)
        # GroupNorm's default affine (1, 0) makes every sample's mean exactly 0 whatever the input; a random
        # affine keeps the input and every parameter in the result.
        nn.init.normal_(self.group_norm.weight, 1.0, 0.5)
        nn.init.normal_(self.group_norm.bias, 0.0, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group_norm(self.conv(x)).mean(dim=[1, 2, 3, 4])


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
