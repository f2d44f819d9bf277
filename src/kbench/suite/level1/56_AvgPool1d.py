"""1D average pooling: kernel 8, stride 4, padding 2 (padded zeros count towards the average)."""

import torch
import torch.nn as nn

batch_size = 64
channels = 128
length = 65536

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 6, "length": 1025}}
KBENCH_TAGS = ["pooling"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size=8, stride=4, padding=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return []
