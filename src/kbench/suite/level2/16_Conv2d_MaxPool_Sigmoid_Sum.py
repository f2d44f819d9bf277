"""2D convolution, max pooling, sigmoid, then a sum per sample."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
pool_size = 2

KBENCH_PRESETS = {
    "small": {
        "batch_size": 16,
        "in_channels": 3,
        "out_channels": 16,
        "height": 18,
        "width": 18,
        "kernel_size": 3,
    }
}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.max_pool2d(self.conv(x), self.pool_size)).sum(dim=[1, 2, 3])


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_size]
