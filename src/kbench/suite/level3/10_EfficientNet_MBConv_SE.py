"""EfficientNet MBConv block: 1x1 expand + SiLU, depthwise 3x3 + SiLU, squeeze-excitation, 1x1 project, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
channels = 40
expand_ratio = 6
se_ratio = 4
height = 56
width = 56

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 8, "height": 16, "width": 16}}
KBENCH_TAGS = ["architecture", "cnn", "residual", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, channels: int, expand_ratio: int, se_ratio: int):
        super().__init__()
        hidden = channels * expand_ratio
        squeezed = max(1, channels // se_ratio)
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn0 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.se_reduce = nn.Conv2d(hidden, squeezed, 1)
        self.se_expand = nn.Conv2d(squeezed, hidden, 1)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.bn0(self.expand(x)))
        h = F.silu(self.bn1(self.depthwise(h)))
        s = F.adaptive_avg_pool2d(h, 1)
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(s))))
        h = self.bn2(self.project(h * s))
        return x + h


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, expand_ratio, se_ratio]
