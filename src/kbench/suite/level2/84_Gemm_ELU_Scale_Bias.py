"""Linear layer, ELU, then a learned per-feature scale and bias."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 23, "in_features": 64, "out_features": 48}}
KBENCH_TAGS = ["gemm-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(self.linear(x)) * self.scale + self.bias


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
