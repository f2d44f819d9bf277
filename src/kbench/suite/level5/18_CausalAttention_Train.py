"""Causal attention written out, forward and backward: softmax(mask(q @ k^T / sqrt(d))) @ v.

The scores are materialised as plain PyTorch computes them: scaled q @ k^T, the future positions set to
-inf, a softmax over the keys, then the product with v. A training step: the gradients of q, k and v
from an upstream gradient of the output (the last input)."""

import torch
import torch.nn as nn

# 4 x 16 heads x 1024^2 scores: 256 MiB per score-sized tensor; ~5e10 FLOP forward and backward.
batch_size = 4
num_heads = 16
seq_len = 1024
head_dim = 64

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 2, "seq_len": 80, "head_dim": 32}}
KBENCH_TAGS = ["training", "attention", "softmax"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0, 1, 2]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        s = q.shape[-2]
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
