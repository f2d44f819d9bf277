"""Square linear layer plus its input (residual), then ReLU."""

import torch
import torch.nn as nn

batch_size = 4096
features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 33, "features": 64}}
KBENCH_TAGS = ["gemm-epilogue", "residual"]


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) + x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
