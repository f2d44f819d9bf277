"""Classifier head: conv, ReLU, global average pool, linear, softmax."""

import torch
import torch.nn as nn

batch_size = 96
in_channels = 64
out_channels = 256
height = 64
width = 64
kernel_size = 3
num_classes = 1000

KBENCH_PRESETS = {
    "small": {
        "batch_size": 8,
        "in_channels": 3,
        "out_channels": 16,
        "height": 13,
        "width": 13,
        "num_classes": 100,
    }
}
KBENCH_TAGS = ["conv-epilogue", "softmax", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc = nn.Linear(out_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3))), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_classes]
