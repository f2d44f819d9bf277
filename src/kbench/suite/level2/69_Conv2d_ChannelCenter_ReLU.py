"""2D convolution, subtract the mean over channels, then ReLU."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "height": 17, "width": 15}}
KBENCH_TAGS = ["conv-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return torch.relu(y - y.mean(dim=1, keepdim=True))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
