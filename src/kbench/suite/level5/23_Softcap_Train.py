"""Logit soft-capping (Gemma 2's attention logits), forward and backward: y = cap * tanh(x / cap).

A training step: the gradient of the logits x from an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn

# 8 x 16 heads x 1024^2 attention logits = 2^27 elements: 512 MiB per tensor (x, dy, y, dx).
batch_size = 8
num_heads = 16
seq_len = 1024
cap = 30.0

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 2, "seq_len": 72}}
KBENCH_TAGS = ["training", "activation"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, cap: float):
        super().__init__()
        self.cap = cap

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cap * torch.tanh(x / self.cap)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, seq_len)
    # logits of half the cap's size: the cap bends them (tanh well away from its linear part)
    return [0.5 * cap * torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [cap]
