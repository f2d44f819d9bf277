"""Bias-free stride-2 2D convolution, affine InstanceNorm, then LeakyReLU(0.2)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 256
width = 256
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 3, "out_channels": 16, "height": 29, "width": 33}}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # no bias: InstanceNorm subtracts the per-channel mean, which would cancel it
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, stride=2, padding=kernel_size // 2, bias=False
        )
        self.instance_norm = nn.InstanceNorm2d(out_channels, affine=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(self.instance_norm(self.conv(x)), 0.2)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
