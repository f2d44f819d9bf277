"""2D convolution, tanh, scaling, learned bias, then 2x2 max pooling."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
in_channels = 64
out_channels = 64
height = 128
width = 128
kernel_size = 3
scale = 2.0
bias_shape = (out_channels, 1, 1)
pool_size = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "height": 22, "width": 18}}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue"]


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        scale: float,
        bias_shape: tuple[int, ...],
        pool_size: int,
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.tanh(self.conv(x)) * self.scale + self.bias, self.pool_size)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale, bias_shape, pool_size]
