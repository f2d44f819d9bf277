"""A small U-Net: three down levels, a bottleneck, three up levels with skip concatenations, 1x1 head."""

import torch
import torch.nn as nn

batch_size = 8
in_channels = 3
out_channels = 2
image_size = 256
base_width = 32

KBENCH_PRESETS = {"small": {"batch_size": 2, "image_size": 16, "base_width": 4}}
KBENCH_TAGS = ["architecture", "cnn", "norm-act"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


def double_conv(in_ch: int, out_ch: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(),
        nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(),
    )


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, base_width: int):
        super().__init__()
        widths = [base_width, 2 * base_width, 4 * base_width]
        self.downs = nn.ModuleList()
        ch = in_channels
        for w in widths:
            self.downs.append(double_conv(ch, w))
            ch = w
        self.pool = nn.MaxPool2d(2)
        self.bottleneck = double_conv(ch, 2 * ch)
        ch = 2 * ch
        self.ups = nn.ModuleList()
        self.up_convs = nn.ModuleList()
        for w in reversed(widths):
            self.ups.append(nn.ConvTranspose2d(ch, w, 2, stride=2))
            self.up_convs.append(double_conv(2 * w, w))
            ch = w
        self.head = nn.Conv2d(ch, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skips = []
        for down in self.downs:
            x = down(x)
            skips.append(x)
            x = self.pool(x)
        x = self.bottleneck(x)
        for up, conv, skip in zip(self.ups, self.up_convs, reversed(skips), strict=True):
            x = conv(torch.cat([up(x), skip], dim=1))
        return self.head(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, out_channels, base_width]
