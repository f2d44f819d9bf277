"""ShuffleNet unit: grouped 1x1 conv, channel shuffle, depthwise 3x3, grouped 1x1 conv, residual + ReLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
channels = 240
groups = 3
height = 56
width = 56

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 24, "groups": 3, "height": 16, "width": 16}}
KBENCH_TAGS = ["architecture", "cnn", "residual", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        mid = channels // 4
        self.groups = groups
        self.conv1 = nn.Conv2d(channels, mid, 1, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.dwconv = nn.Conv2d(mid, mid, 3, padding=1, groups=mid, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, channels, 1, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def channel_shuffle(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        x = x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2)
        return x.reshape(b, c, h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        # ReLU after the depthwise BN (the original unit has none): without it, training-mode bn3 cancels
        # bn2's bias exactly, and a kernel could drop that parameter.
        out = F.relu(self.bn2(self.dwconv(self.channel_shuffle(out))))
        out = self.bn3(self.conv2(out))
        return F.relu(out + x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, groups]
