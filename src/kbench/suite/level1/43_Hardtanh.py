"""Hardtanh: x clipped to [min_val, max_val] = [-0.5, 1.0]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 65536
min_val = -0.5
max_val = 1.0

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 257}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self, min_val: float, max_val: float):
        super().__init__()
        self.min_val = min_val
        self.max_val = max_val

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(x, self.min_val, self.max_val)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [min_val, max_val]
