"""GELU with the tanh approximation, forward and backward: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).

A training step: the gradient of x from an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 48 x 2048 x 2048 = 3 x 2^26 elements: 768 MiB per tensor (x, dy, y, dx).
batch_size = 48
seq_len = 2048
hidden = 2048

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 64, "hidden": 200}}
KBENCH_TAGS = ["training", "activation"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x, approximate="tanh")


def get_inputs():
    shape = (batch_size, seq_len, hidden)
    return [torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
