"""1D max pooling: kernel 4, stride 2, padding 1."""

import torch
import torch.nn as nn

batch_size = 64
channels = 128
length = 32768
kernel_size = 4
stride = 2
padding = 1

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 8, "length": 515}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.MaxPool1d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding]
