"""Softmax over the last dimension, forward and backward: y = softmax(x).

A training step: from an upstream gradient dy (the last input), dx = y * (dy - sum(dy * y)) per row, which
needs y (kept from the forward, or recomputed from x and the row's max and sum)."""

import torch
import torch.nn as nn

num_rows = 16384
dim = 8192

KBENCH_PRESETS = {"small": {"num_rows": 128, "dim": 256}}
KBENCH_TAGS = ["training", "softmax"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [2.0 * torch.randn(num_rows, dim), torch.randn(num_rows, dim)]


def get_init_inputs():
    return []
