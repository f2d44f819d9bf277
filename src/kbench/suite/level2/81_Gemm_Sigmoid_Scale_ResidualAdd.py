"""Linear layer y, then y + sigmoid(y) * scale."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 2048
out_features = 8192
scale = 2.0

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 72}}
KBENCH_TAGS = ["gemm-epilogue", "residual", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y + torch.sigmoid(y) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
