"""DenseNet dense block: each layer (BN-ReLU-1x1 conv-BN-ReLU-3x3 conv) sees the concat of all earlier outputs."""

import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
growth_rate = 32
num_layers = 6
height = 56
width = 56

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 8, "growth_rate": 4, "num_layers": 3, "height": 16, "width": 16}
}
KBENCH_TAGS = ["architecture", "cnn", "norm-act"]


class DenseLayer(nn.Module):
    def __init__(self, in_ch: int, growth_rate: int):
        super().__init__()
        bottleneck = 4 * growth_rate
        self.body = nn.Sequential(
            nn.BatchNorm2d(in_ch),
            nn.ReLU(),
            nn.Conv2d(in_ch, bottleneck, 1, bias=False),
            nn.BatchNorm2d(bottleneck),
            nn.ReLU(),
            nn.Conv2d(bottleneck, growth_rate, 3, padding=1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class Model(nn.Module):
    def __init__(self, in_channels: int, growth_rate: int, num_layers: int):
        super().__init__()
        self.layers = nn.ModuleList(
            [DenseLayer(in_channels + i * growth_rate, growth_rate) for i in range(num_layers)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, dim=1)))
        return torch.cat(features, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, growth_rate, num_layers]
