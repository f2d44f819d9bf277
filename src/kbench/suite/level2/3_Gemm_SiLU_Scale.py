"""Linear layer, SiLU, then multiplication by a constant scale."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 4096
out_features = 8192
scale = 1.5

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 48}}
KBENCH_TAGS = ["gemm-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
