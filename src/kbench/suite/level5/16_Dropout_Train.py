"""Dropout with its mask given as an input, forward and backward: y = x * (u >= p) / (1 - p).

u holds uniform numbers in [0, 1) (an input, so the step is deterministic); p is a constant. A training
step: the gradient of x from an upstream gradient dy (the last input), dx = dy * (u >= p) / (1 - p).
Memory-bound: the mask need not be stored, u is there to recompute it."""

import torch
import torch.nn as nn

num_tokens = 12288
dim = 8192
p = 0.1

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 256}}
KBENCH_TAGS = ["training", "dropout", "elementwise"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return x * (u >= self.p) / (1.0 - self.p)


def get_inputs():
    shape = (num_tokens, dim)
    return [torch.randn(shape), torch.rand(shape), torch.randn(shape)]


def get_init_inputs():
    return [p]
