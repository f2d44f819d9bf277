"""3D convolution, minimum over depth, then softmax over channels."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 16
out_channels = 32
depth = 24
height = 64
width = 64
kernel_size = 3

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "depth": 6, "height": 14, "width": 13}
}
KBENCH_TAGS = ["conv-epilogue", "reduction-chain", "softmax"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.amin(self.conv(x), dim=2), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
