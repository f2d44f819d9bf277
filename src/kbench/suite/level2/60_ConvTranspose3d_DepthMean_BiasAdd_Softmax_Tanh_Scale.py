"""3D transposed convolution, mean over depth, learned bias, softmax over channels, tanh, then scaling."""

import torch
import torch.nn as nn

batch_size = 16
in_channels = 32
out_channels = 64
depth = 16
height = 64
width = 64
kernel_size = 3
padding = 1
scale = 2.0
bias_shape = (out_channels, 1, 1, 1)

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "in_channels": 3, "out_channels": 8, "depth": 5, "height": 13, "width": 11}
}
KBENCH_TAGS = ["conv-epilogue", "softmax", "reduction-chain"]


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        padding: int,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, padding=padding)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv_transpose(x).mean(dim=2, keepdim=True) + self.bias
        return torch.tanh(torch.softmax(y, dim=1)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, padding, scale, bias_shape]
