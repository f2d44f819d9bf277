"""ResNet bottleneck block with stride 2: 1x1 reduce, 3x3 strided, 1x1 expand, and a projection shortcut."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
in_channels = 256
mid_channels = 128
out_channels = 512
height = 56
width = 56
stride = 2

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 16,
        "mid_channels": 8,
        "out_channels": 32,
        "height": 16,
        "width": 16,
    }
}
KBENCH_TAGS = ["architecture", "cnn", "residual", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, in_channels: int, mid_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, mid_channels, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        self.conv3 = nn.Conv2d(mid_channels, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.shortcut = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False), nn.BatchNorm2d(out_channels)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.shortcut(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, mid_channels, out_channels, stride]
