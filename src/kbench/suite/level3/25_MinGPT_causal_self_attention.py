"""MinGPT-style causal self-attention written out: QKV projection, masked softmax(QK^T/sqrt(d))V, projection."""

import math

import torch
import torch.nn as nn

# The materialised 16 x 12 x 1024 x 1024 fp32 score matrix is 768 MiB (eager keeps ~3 such tensors).
batch_size = 16
seq_len = 1024
dim = 768
num_heads = 12

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 16, "dim": 64, "num_heads": 4}}
KBENCH_TAGS = ["architecture", "attention", "transformer", "softmax"]


class Model(nn.Module):
    def __init__(self, dim: int, num_heads: int, max_seq_len: int):
        super().__init__()
        self.num_heads = num_heads
        self.c_attn = nn.Linear(dim, 3 * dim)
        self.c_proj = nn.Linear(dim, dim)
        mask = torch.tril(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_seq_len, max_seq_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        head_dim = d // self.num_heads
        q, k, v = self.c_attn(x).split(d, dim=2)
        q = q.view(b, t, self.num_heads, head_dim).transpose(1, 2)
        k = k.view(b, t, self.num_heads, head_dim).transpose(1, 2)
        v = v.view(b, t, self.num_heads, head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))
        att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        return self.c_proj(y)


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim)]


def get_init_inputs():
    return [dim, num_heads, seq_len]
