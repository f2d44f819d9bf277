"""MobileNetV2 inverted-residual block: 1x1 expand, 3x3 depthwise, 1x1 linear projection, plus the input."""

import torch
import torch.nn as nn

batch_size = 64
channels = 32
expand_ratio = 6
height = 112
width = 112

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 8, "height": 16, "width": 16}}
KBENCH_TAGS = ["architecture", "cnn", "residual", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, channels: int, expand_ratio: int):
        super().__init__()
        hidden = channels * expand_ratio
        self.block = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(),
            nn.Conv2d(hidden, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, expand_ratio]
