"""Bias-free 1D convolution, BatchNorm with batch statistics, then GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 128
out_channels = 256
length = 16384
kernel_size = 3

KBENCH_PRESETS = {"small": {"batch_size": 4, "in_channels": 4, "out_channels": 8, "length": 97}}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        # no conv bias: training-mode BatchNorm subtracts the per-channel mean, which would cancel it
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.batch_norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
