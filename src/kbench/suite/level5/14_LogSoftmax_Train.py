"""Log-softmax over the last dimension, forward and backward: y = x - logsumexp(x).

A training step: from an upstream gradient dy (the last input), dx = dy - exp(y) * sum(dy) per row."""

import torch
import torch.nn as nn

num_rows = 16384
dim = 12288

KBENCH_PRESETS = {"small": {"num_rows": 128, "dim": 256}}
KBENCH_TAGS = ["training", "softmax"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=-1)


def get_inputs():
    return [2.0 * torch.randn(num_rows, dim), torch.randn(num_rows, dim)]


def get_init_inputs():
    return []
