"""Cosine-classifier head: linear layer, L2 normalization per row, then scaling."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 4096
scale = 16.0

KBENCH_PRESETS = {"small": {"batch_size": 29, "in_features": 64, "out_features": 80}}
KBENCH_TAGS = ["gemm-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.linear(x), dim=1) * self.scale


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
