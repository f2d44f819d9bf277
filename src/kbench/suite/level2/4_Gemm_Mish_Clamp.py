"""Linear layer, Mish, then clamp to [-1, 1]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 2048
out_features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 33, "in_features": 80, "out_features": 64}}
KBENCH_TAGS = ["gemm-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp(F.mish(self.linear(x)), -1.0, 1.0)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
