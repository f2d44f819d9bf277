"""Linear layer, sigmoid, then a cumulative sum over the output features."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 31, "in_features": 64, "out_features": 90}}
KBENCH_TAGS = ["gemm-epilogue", "scan"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(torch.sigmoid(self.linear(x)), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
