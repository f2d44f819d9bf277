"""2D transposed convolution, spatial mean, learned bias, logsumexp over channels, then scaling."""

import torch
import torch.nn as nn

batch_size = 48
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
scale = 10.0
bias_shape = (out_channels, 1, 1)

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_channels": 3, "out_channels": 16, "height": 9, "width": 9}}
KBENCH_TAGS = ["conv-epilogue", "reduction-chain"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, scale: float, bias_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x).mean(dim=(2, 3), keepdim=True) + self.bias
        return torch.logsumexp(y, dim=1, keepdim=True) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale, bias_shape]
