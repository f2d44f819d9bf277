"""Linear layer whose int4-style weights are dequantized with per-group scales (group of 128), then GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 4096
group_size = 128

KBENCH_PRESETS = {"small": {"batch_size": 19, "in_features": 64, "out_features": 48, "group_size": 16}}
KBENCH_TAGS = ["gemm-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, group_size: int):
        super().__init__()
        self.group_size = group_size
        self.weight_q = nn.Parameter(torch.randint(-8, 8, (out_features, in_features)).float())
        self.scales = nn.Parameter(torch.rand(out_features, in_features // group_size) * 0.01 + 0.005)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, k = self.weight_q.shape
        groups = self.weight_q.view(n, k // self.group_size, self.group_size)
        weight = (groups * self.scales.unsqueeze(-1)).view(n, k)
        return F.gelu(F.linear(x, weight, self.bias))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, group_size]
