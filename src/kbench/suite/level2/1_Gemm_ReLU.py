"""Linear layer followed by ReLU: a matmul with its activation fused into the epilogue."""

import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
out_features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 48}}
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
