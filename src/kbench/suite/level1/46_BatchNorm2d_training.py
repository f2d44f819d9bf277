"""BatchNorm2d in training mode: normalise each channel with the batch's own mean and variance."""

import torch
import torch.nn as nn

# Per-channel statistics reduce over batch * H * W = 2^22 elements.
batch_size = 64
channels = 64
height = 256
width = 256

KBENCH_PRESETS = {"small": {"batch_size": 4, "channels": 6, "height": 15, "width": 17}}
KBENCH_TAGS = ["norm"]


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.bn.train()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels]
