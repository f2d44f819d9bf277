"""RMSNorm written out: x / sqrt(mean(x^2) + eps) * weight over the last dimension."""

import torch
import torch.nn as nn

batch_size = 16
seq_len = 4096
hidden = 4096
eps = 1e-6

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 29, "hidden": 112}}
KBENCH_TAGS = ["norm"]


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]
