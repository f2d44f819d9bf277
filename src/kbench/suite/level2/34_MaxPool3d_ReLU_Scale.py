"""3D max pooling, ReLU, then multiplication by a constant scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
channels = 32
depth = 64
height = 128
width = 128
kernel_size = 2
scale = 0.5

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 5, "depth": 8, "height": 14, "width": 18}}
KBENCH_TAGS = ["pool-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, kernel_size: int, scale: float):
        super().__init__()
        self.kernel_size = kernel_size
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(F.max_pool3d(x, self.kernel_size)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, channels, depth, height, width)]


def get_init_inputs():
    return [kernel_size, scale]
