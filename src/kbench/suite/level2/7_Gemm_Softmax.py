"""Linear layer followed by a softmax over the output features."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 2048
out_features = 8192

KBENCH_PRESETS = {"small": {"batch_size": 32, "in_features": 64, "out_features": 100}}
KBENCH_TAGS = ["gemm-epilogue", "softmax"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x), dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
