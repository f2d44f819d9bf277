"""Feed-forward with squared ReLU activation: fc2(relu(fc1(x)) ** 2)."""

import torch
import torch.nn as nn

num_tokens = 2048
dim = 2048
hidden = 8192

KBENCH_PRESETS = {"small": {"num_tokens": 27, "dim": 64, "hidden": 256}}
KBENCH_TAGS = ["mlp", "gemm-epilogue"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)) ** 2)


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
