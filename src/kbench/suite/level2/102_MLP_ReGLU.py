"""ReGLU feed-forward: down(relu(gate(x)) * up(x)) with biased linears."""

import torch
import torch.nn as nn

num_tokens = 4096
dim = 1024
hidden = 4096

KBENCH_PRESETS = {"small": {"num_tokens": 25, "dim": 48, "hidden": 128}}
KBENCH_TAGS = ["mlp", "gemm-epilogue"]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.gate(x)) * self.up(x))


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
