"""3D convolution, softmax over channels, then two 3D max poolings."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 8
out_channels = 32
depth = 32
height = 64
width = 64
kernel_size = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "depth": 10, "height": 14, "width": 14}
}
KBENCH_TAGS = ["conv-epilogue", "softmax", "pool-epilogue"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool3d(F.max_pool3d(torch.softmax(self.conv(x), dim=1), 2), 2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
