"""1D convolution, GroupNorm, then ReLU."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 128
out_channels = 256
length = 16384
kernel_size = 5
num_groups = 16

KBENCH_PRESETS = {
    "small": {"batch_size": 3, "in_channels": 4, "out_channels": 16, "length": 121, "num_groups": 4}
}
KBENCH_TAGS = ["conv-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.group_norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
