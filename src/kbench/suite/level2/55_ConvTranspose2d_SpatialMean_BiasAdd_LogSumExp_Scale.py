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
    # An offset per sample and channel survives the spatial mean: without it the mean over 130 x 130 outputs
    # is the bias to ~1e-3 and the output the same for any input to ~1e-4 of itself (a constant passed at
    # the full size; kbench verify --trivial).
    x = torch.randn(batch_size, in_channels, height, width)
    return [x + torch.randn(batch_size, in_channels, 1, 1)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, scale, bias_shape]
