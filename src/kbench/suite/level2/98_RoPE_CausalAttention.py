"""Rotary position embedding applied to queries and keys, then causal attention."""

import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64
base = 10000.0

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 3, "seq_len": 29, "head_dim": 16}}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self, head_dim: int, base: float):
        super().__init__()
        inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        angles = torch.outer(torch.arange(seq, device=q.device).float(), self.inv_freq)
        cos = torch.cat([angles.cos(), angles.cos()], dim=-1)
        sin = torch.cat([angles.sin(), angles.sin()], dim=-1)
        q = q * cos + torch.cat([-q[..., q.shape[-1] // 2 :], q[..., : q.shape[-1] // 2]], dim=-1) * sin
        k = k * cos + torch.cat([-k[..., k.shape[-1] // 2 :], k[..., : k.shape[-1] // 2]], dim=-1) * sin
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        mask = torch.triu(torch.ones(seq, seq, device=q.device), diagonal=1).bool()
        return torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), v)


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return [head_dim, base]
