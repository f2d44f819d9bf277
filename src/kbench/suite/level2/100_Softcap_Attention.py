"""Attention whose scores are soft-capped with cap * tanh(scores / cap) before softmax."""

import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64
softcap = 4.0

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 3, "seq_len": 33, "head_dim": 16}}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self, softcap: float):
        super().__init__()
        self.softcap = softcap

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        scores = self.softcap * torch.tanh(scores / self.softcap)
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return [softcap]
