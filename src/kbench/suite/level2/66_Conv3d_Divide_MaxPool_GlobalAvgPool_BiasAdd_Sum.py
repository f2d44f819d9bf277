"""3D convolution, division by a constant, max pooling, global average pooling, learned bias, channel sum."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 16
out_channels = 32
depth = 16
height = 64
width = 64
kernel_size = 3
divisor = 2.0
bias_shape = (out_channels, 1, 1, 1)

KBENCH_PRESETS = {
    "small": {"batch_size": 16, "in_channels": 3, "out_channels": 8, "depth": 6, "height": 10, "width": 10}
}
KBENCH_TAGS = ["conv-epilogue", "pool-epilogue", "reduction-chain"]
# 16-32 outputs of rms < 1: the fp16 computation needs ~2e-4 (its rounding over rms + |out|), within 2x of
# the default 1e-4 (kbench verify --trivial).
KBENCH_TOLERANCE = {"fp32": 5e-5}


class Model(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        divisor: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.adaptive_avg_pool3d(F.max_pool3d(self.conv(x) / self.divisor, 2), 1) + self.bias
        return y.sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, divisor, bias_shape]
