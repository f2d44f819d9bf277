"""Linear layer, GroupNorm, SiLU, learned per-feature multiplier, SiLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 4096
out_features = 4096
num_groups = 16

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 64, "num_groups": 4}}
KBENCH_TAGS = ["gemm-epilogue", "norm-act", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)
        self.multiplier = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(F.silu(self.group_norm(self.linear(x))) * self.multiplier)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, num_groups]
