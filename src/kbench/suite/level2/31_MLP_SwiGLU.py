"""SwiGLU feed-forward: down(silu(gate(x)) * up(x)) with bias-free linears."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
dim = 2048
hidden = 5632

KBENCH_PRESETS = {"small": {"num_tokens": 21, "dim": 64, "hidden": 176}}
KBENCH_TAGS = ["mlp", "gemm-epilogue"]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
