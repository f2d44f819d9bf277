"""1D convolution (same padding), SiLU, then max pooling over length."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 128
out_channels = 256
length = 16384
kernel_size = 3
pool_size = 2

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 4, "out_channels": 8, "length": 250}}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool1d(F.silu(self.conv(x)), self.pool_size)


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_size]
