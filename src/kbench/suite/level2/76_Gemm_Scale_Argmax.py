"""Linear layer, learned per-class scale, then the argmax class per row (int64 output)."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 8192
out_features = 1000

KBENCH_PRESETS = {"small": {"batch_size": 256, "in_features": 64, "out_features": 37}}
KBENCH_TAGS = ["gemm-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.argmax(self.linear(x) * self.scale, dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
