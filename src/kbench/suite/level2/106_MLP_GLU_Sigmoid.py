"""Feed-forward with the original sigmoid GLU: fc2(glu(fc1(x)))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
dim = 2048
hidden = 4096

KBENCH_PRESETS = {"small": {"num_tokens": 20, "dim": 64, "hidden": 72}}
KBENCH_TAGS = ["mlp", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, 2 * hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.glu(self.fc1(x), dim=-1))


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
