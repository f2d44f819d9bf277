"""Embedding lookup scaled by a learned vector, forward and backward: y = weight[ids] * scale.

A training step: the gradients of the table and of the scale from an upstream gradient dy (the last
input). The table's gradient is a scatter-add of dy * scale into the rows the ids name (a row named twice
gets both), zero elsewhere; the scale's is the sum over tokens of dy * weight[ids]."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 16 x 2048 = 32768 tokens into a 32000-row table of 1024: 125 MiB table and gradient, 128 MiB y and dy;
# about two in three tokens share their row with another.
batch_size = 16
seq_len = 2048
vocab_size = 32000
dim = 1024

KBENCH_PRESETS = {"small": {"batch_size": 4, "seq_len": 50, "vocab_size": 97, "dim": 96}}
KBENCH_TAGS = ["training", "gather"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": []}


class Model(nn.Module):
    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, dim))
        self.scale = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight) * self.scale


def get_inputs():
    # dy scaled by 1/sqrt(tokens), as a loss averaged over the tokens scales it: the scale's gradient, a
    # sum over the tokens, stays O(1) and is judged relative to its own scale (compare.py's floor is
    # min(1, rms)); unscaled, an honest fp32 sum in another order misses 1e-4 where it nears 0
    dy = torch.randn(batch_size, seq_len, dim) / (batch_size * seq_len) ** 0.5
    return [torch.randint(0, vocab_size, (batch_size, seq_len)), dy]


def get_init_inputs():
    return [vocab_size, dim]
