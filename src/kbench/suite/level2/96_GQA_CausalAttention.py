"""Grouped-query causal attention: each key/value head serves num_heads // num_kv_heads query heads."""

import math

import torch
import torch.nn as nn

batch_size = 4
num_heads = 32
num_kv_heads = 8
seq_len = 1024
head_dim = 64

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "num_heads": 6, "num_kv_heads": 2, "seq_len": 37, "head_dim": 16}
}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self, num_heads: int, num_kv_heads: int):
        super().__init__()
        self.group = num_heads // num_kv_heads

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        k = k.repeat_interleave(self.group, dim=1)
        v = v.repeat_interleave(self.group, dim=1)
        seq = q.shape[-2]
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones(seq, seq, device=q.device), diagonal=1).bool()
        return torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), v)


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_kv_heads, seq_len, head_dim),
        torch.randn(batch_size, num_kv_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return [num_heads, num_kv_heads]
