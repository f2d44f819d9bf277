"""3D convolution, ReLU, then a learned per-channel bias."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
kernel_size = 3
bias_shape = (out_channels, 1, 1, 1)

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 3,
        "out_channels": 8,
        "depth": 6,
        "height": 9,
        "width": 9,
        "kernel_size": 3,
    }
}
KBENCH_TAGS = ["conv-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, bias_shape: tuple[int, ...]):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, bias_shape]
