"""Residual addition followed by LayerNorm over the last dimension."""

import torch
import torch.nn as nn

batch_size = 32
seq_len = 2048
dim = 4096

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 13, "dim": 192}}
KBENCH_TAGS = ["norm-act", "residual"]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x + residual)


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim), torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim]
