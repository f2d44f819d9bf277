"""Attention scores scaled, causally masked (upper triangle to -inf), then softmax."""

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
scale = 0.125

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 3, "seq_len": 37}}
KBENCH_TAGS = ["softmax", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, seq_len: int, scale: float):
        super().__init__()
        self.seq_len = seq_len
        self.scale = scale

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        mask = torch.triu(torch.ones(self.seq_len, self.seq_len, device=scores.device), diagonal=1).bool()
        return torch.softmax((scores * self.scale).masked_fill(mask, float("-inf")), dim=-1)


def get_inputs():
    return [torch.randn(batch_size, num_heads, seq_len, seq_len)]


def get_init_inputs():
    return [seq_len, scale]
