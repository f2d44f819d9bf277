"""3D convolution, HardSwish, ReLU, softmax over channels, then the spatial mean."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
kernel_size = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 8, "in_channels": 3, "out_channels": 32, "depth": 5, "height": 8, "width": 8}
}
KBENCH_TAGS = ["conv-epilogue", "softmax", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.relu(F.hardswish(self.conv(x))), dim=1).mean(dim=(2, 3, 4))


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
