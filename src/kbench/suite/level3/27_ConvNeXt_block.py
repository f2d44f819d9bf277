"""ConvNeXt block: depthwise 7x7 conv, channels-last LayerNorm, 4x GELU MLP, layer scale, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
channels = 192
height = 56
width = 56
# Layer scale starts at 0.5, not ConvNeXt's 1e-6: at 1e-6 the branch would sit below fp32 tolerance,
# so a kernel that skipped it entirely would still pass.
layer_scale_init = 0.5

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 16, "height": 16, "width": 16}}
KBENCH_TAGS = ["architecture", "cnn", "residual"]


class Model(nn.Module):
    def __init__(self, channels: int, layer_scale_init: float):
        super().__init__()
        self.dwconv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels, eps=1e-6)
        self.pwconv1 = nn.Linear(channels, 4 * channels)
        self.pwconv2 = nn.Linear(4 * channels, channels)
        self.gamma = nn.Parameter(layer_scale_init * torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, layer_scale_init]
