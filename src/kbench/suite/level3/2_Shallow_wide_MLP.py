"""A shallow, wide MLP: one very wide GELU hidden layer between two linear projections."""

import torch
import torch.nn as nn

# 2 * 2048 * (4096 * 16384 + 16384 * 1024) = 3.4e11 FLOP; the hidden activation is 128 MiB.
batch_size = 2048
input_size = 4096
hidden_size = 16384
output_size = 1024

KBENCH_PRESETS = {"small": {"batch_size": 64, "input_size": 40, "hidden_size": 160, "output_size": 48}}
KBENCH_TAGS = ["architecture", "mlp", "gemm-epilogue"]


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, output_size: int):
        super().__init__()
        self.fc1 = nn.Linear(input_size, hidden_size)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_size, output_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, output_size]
