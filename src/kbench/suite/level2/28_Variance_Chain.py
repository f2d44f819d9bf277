"""Row variance written as mean, subtraction, square and mean."""

import torch
import torch.nn as nn

rows = 16384
cols = 16384

KBENCH_PRESETS = {"small": {"rows": 257, "cols": 130}}
KBENCH_TAGS = ["reduction-chain"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        return ((x - mean) ** 2).mean(dim=-1)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
