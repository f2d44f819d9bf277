"""Linear layer (matmul + bias) followed by ReLU: a GEMM with an elementwise epilogue."""

import torch
import torch.nn as nn

batch_size = 1024
in_features = 2048
out_features = 2048

KBENCH_PRESETS = {"small": {"batch_size": 32, "in_features": 64, "out_features": 48}}
KBENCH_TAGS = ["gemm-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
