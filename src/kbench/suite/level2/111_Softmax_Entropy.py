"""Entropy of the softmax distribution of each row: -(p * log p).sum(-1)."""

import torch
import torch.nn as nn

rows = 16384
cols = 8192

KBENCH_PRESETS = {"small": {"rows": 67, "cols": 130}}
KBENCH_TAGS = ["softmax", "reduction-chain"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return -(torch.softmax(x, dim=-1) * torch.log_softmax(x, dim=-1)).sum(dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
