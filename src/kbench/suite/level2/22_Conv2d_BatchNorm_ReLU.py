"""2D convolution, BatchNorm with batch statistics (training mode), then ReLU."""

import torch
import torch.nn as nn

batch_size = 64
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3

KBENCH_PRESETS = {
    "small": {
        "batch_size": 4,
        "in_channels": 3,
        "out_channels": 16,
        "height": 15,
        "width": 17,
        "kernel_size": 3,
    }
}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.batch_norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
