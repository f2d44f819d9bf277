"""U-Net decoder block: 2x transposed-conv upsampling, concat with the skip tensor, two 3x3 conv-BN-ReLU."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 256
out_channels = 128
height = 64
width = 64

KBENCH_PRESETS = {"small": {"batch_size": 2, "in_channels": 16, "out_channels": 8, "height": 8, "width": 8}}
KBENCH_TAGS = ["architecture", "cnn", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, 2, stride=2)
        self.double_conv = nn.Sequential(
            nn.Conv2d(2 * out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
            nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(),
        )

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        return self.double_conv(torch.cat([self.up(x), skip], dim=1))


def get_inputs():
    return [
        torch.randn(batch_size, in_channels, height, width),
        torch.randn(batch_size, out_channels, 2 * height, 2 * width),
    ]


def get_init_inputs():
    return [in_channels, out_channels]
