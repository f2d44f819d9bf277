"""Inception block: parallel 1x1, 1x1->3x3, 1x1->5x5 and maxpool->1x1 branches, concatenated on channels."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 48
in_channels = 192
height = 56
width = 56
ch1x1 = 64
ch3x3_reduce = 96
ch3x3 = 128
ch5x5_reduce = 16
ch5x5 = 32
pool_proj = 32

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 12,
        "height": 16,
        "width": 16,
        "ch1x1": 4,
        "ch3x3_reduce": 6,
        "ch3x3": 8,
        "ch5x5_reduce": 2,
        "ch5x5": 4,
        "pool_proj": 4,
    }
}
KBENCH_TAGS = ["architecture", "cnn"]


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        ch1x1: int,
        ch3x3_reduce: int,
        ch3x3: int,
        ch5x5_reduce: int,
        ch5x5: int,
        pool_proj: int,
    ):
        super().__init__()
        self.branch1 = nn.Conv2d(in_channels, ch1x1, 1)
        self.branch3 = nn.Sequential(
            nn.Conv2d(in_channels, ch3x3_reduce, 1), nn.ReLU(), nn.Conv2d(ch3x3_reduce, ch3x3, 3, padding=1)
        )
        self.branch5 = nn.Sequential(
            nn.Conv2d(in_channels, ch5x5_reduce, 1), nn.ReLU(), nn.Conv2d(ch5x5_reduce, ch5x5, 5, padding=2)
        )
        self.branch_pool = nn.Conv2d(in_channels, pool_proj, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = F.max_pool2d(x, 3, stride=1, padding=1)
        branches = [self.branch1(x), self.branch3(x), self.branch5(x), self.branch_pool(pooled)]
        return F.relu(torch.cat(branches, dim=1))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, ch1x1, ch3x3_reduce, ch3x3, ch5x5_reduce, ch5x5, pool_proj]
