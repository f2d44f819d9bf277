"""Pre-norm feed-forward sub-block: x + SwiGLU(RMSNorm(x))."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
dim = 2048
hidden = 5632
eps = 1e-06

KBENCH_PRESETS = {"small": {"num_tokens": 23, "dim": 64, "hidden": 176}}
KBENCH_TAGS = ["mlp", "residual", "norm-act"]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + torch.randn(dim) * 0.1)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def get_inputs():
    return [torch.randn(num_tokens, dim)]


def get_init_inputs():
    return [dim, hidden, eps]
