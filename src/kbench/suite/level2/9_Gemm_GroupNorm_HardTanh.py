"""Linear layer, GroupNorm over the features, then hardtanh to [-2, 2]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 4096
out_features = 4096
num_groups = 32

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 48, "num_groups": 8}}
KBENCH_TAGS = ["gemm-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(self.group_norm(self.linear(x)), -2.0, 2.0)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
