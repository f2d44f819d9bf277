"""Causal scaled dot-product attention written out with matmul, mask and softmax."""

import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 3, "seq_len": 45, "head_dim": 16}}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones(seq, seq, device=q.device), diagonal=1).bool()
        weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
        return torch.matmul(weights, v)


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return []
