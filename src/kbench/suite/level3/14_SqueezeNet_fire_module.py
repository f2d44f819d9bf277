"""SqueezeNet fire module: a 1x1 squeeze conv, then parallel 1x1 and 3x3 expand convs, concatenated."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
in_channels = 256
squeeze_channels = 32
expand1x1_channels = 128
expand3x3_channels = 128
height = 56
width = 56

KBENCH_PRESETS = {
    "small": {
        "batch_size": 2,
        "in_channels": 16,
        "squeeze_channels": 4,
        "expand1x1_channels": 8,
        "expand3x3_channels": 8,
        "height": 16,
        "width": 16,
    }
}
KBENCH_TAGS = ["architecture", "cnn"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(
        self, in_channels: int, squeeze_channels: int, expand1x1_channels: int, expand3x3_channels: int
    ):
        super().__init__()
        self.squeeze = nn.Conv2d(in_channels, squeeze_channels, 1)
        self.expand1x1 = nn.Conv2d(squeeze_channels, expand1x1_channels, 1)
        self.expand3x3 = nn.Conv2d(squeeze_channels, expand3x3_channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.expand1x1(s)), F.relu(self.expand3x3(s))], dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, squeeze_channels, expand1x1_channels, expand3x3_channels]
