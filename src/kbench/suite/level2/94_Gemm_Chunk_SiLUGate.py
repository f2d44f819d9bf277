"""One linear layer to twice the width, split in halves a, b, then a * silu(b)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
out_features = 2048

KBENCH_PRESETS = {"small": {"batch_size": 18, "in_features": 64, "out_features": 40}}
KBENCH_TAGS = ["gemm-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.linear(x).chunk(2, dim=-1)
        return a * F.silu(b)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
