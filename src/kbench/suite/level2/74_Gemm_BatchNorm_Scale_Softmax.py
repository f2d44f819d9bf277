"""Bias-free linear layer, BatchNorm1d with batch statistics, learned per-feature scale, then softmax."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 2048

KBENCH_PRESETS = {"small": {"batch_size": 32, "in_features": 64, "out_features": 48}}
KBENCH_TAGS = ["gemm-epilogue", "norm-act", "softmax"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # no linear bias: training-mode BatchNorm would cancel it
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.batch_norm = nn.BatchNorm1d(out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.batch_norm(self.linear(x)) * self.scale, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
