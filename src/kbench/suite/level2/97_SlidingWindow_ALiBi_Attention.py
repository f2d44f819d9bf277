"""Causal sliding-window attention with ALiBi linear position biases (per-head slopes)."""

import math

import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 64
window = 256

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 4, "seq_len": 41, "head_dim": 16, "window": 9}}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self, num_heads: int, window: int):
        super().__init__()
        self.window = window
        # ALiBi's geometric slopes 2^(-8 i / num_heads), i = 1..num_heads
        slopes = torch.tensor([2.0 ** (-8.0 * (i + 1) / num_heads) for i in range(num_heads)])
        self.register_buffer("slopes", slopes.view(1, num_heads, 1, 1))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        seq = q.shape[-2]
        pos = torch.arange(seq, device=q.device)
        distance = (pos.view(-1, 1) - pos.view(1, -1)).float()
        outside = (distance < 0) | (distance >= self.window)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1]) - self.slopes * distance
        return torch.matmul(torch.softmax(scores.masked_fill(outside, float("-inf")), dim=-1), v)


def get_inputs():
    return [
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
        torch.randn(batch_size, num_heads, seq_len, head_dim),
    ]


def get_init_inputs():
    return [num_heads, window]
