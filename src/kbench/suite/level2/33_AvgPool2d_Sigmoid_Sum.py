"""2D average pooling, sigmoid, then a sum over the spatial dimensions."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
channels = 128
height = 256
width = 256
kernel_size = 2

KBENCH_PRESETS = {"small": {"batch_size": 4, "channels": 37, "height": 18, "width": 22}}
KBENCH_TAGS = ["pool-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(F.avg_pool2d(x, self.kernel_size)).sum(dim=[2, 3])


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size]
