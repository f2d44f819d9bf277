"""GeGLU feed-forward with one input projection split in two: down(gelu_tanh(a) * b)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
dim = 2048
hidden = 5632

KBENCH_PRESETS = {"small": {"num_tokens": 21, "dim": 64, "hidden": 96}}
KBENCH_TAGS = ["mlp", "gemm-epilogue"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w_in = nn.Linear(dim, 2 * hidden, bias=False)
        self.w_out = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.w_in(x).chunk(2, dim=-1)
        return self.w_out(F.gelu(a, approximate="tanh") * b)


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden]
