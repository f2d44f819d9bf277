"""Linear layer, RMSNorm with a learned weight, then SiLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 4096
eps = 1e-06

KBENCH_PRESETS = {"small": {"batch_size": 19, "in_features": 64, "out_features": 96}}
KBENCH_TAGS = ["gemm-epilogue", "norm-act"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
        return F.silu(y)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, eps]
