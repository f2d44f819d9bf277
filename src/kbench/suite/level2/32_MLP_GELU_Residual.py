"""Two-layer GELU MLP with a residual connection: x + fc2(gelu(fc1(x)))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
dim = 2048
hidden = 8192

KBENCH_PRESETS = {"small": {"num_tokens": 23, "dim": 64, "hidden": 256}}
KBENCH_TAGS = ["mlp", "residual"]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(x)))


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
