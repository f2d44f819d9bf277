"""Rotary position embeddings on queries and keys, forward and backward (the rotate-half form).

q and k are (batch, heads, seq, head_dim); cos and sin are (seq, head_dim) tables (each frequency twice,
for the two halves), inputs without gradients. out = x * cos + rotate_half(x) * sin with rotate_half(x) =
cat(-x2, x1) for the halves x1, x2 of the last dimension. Two outputs, so two upstream gradients (the last
two inputs); the backward is the inverse rotation: dx = dout * cos + rotate_half^T(dout * sin)."""

import torch
import torch.nn as nn

batch = 4
heads = 32
seq = 2048
head_dim = 128
base = 10000.0

KBENCH_PRESETS = {"small": {"batch": 2, "heads": 4, "seq": 32, "head_dim": 64}}
KBENCH_TAGS = ["training", "rope", "elementwise-chain"]
KBENCH_TRAINING = {"upstream": 2, "grad_inputs": [0, 1]}


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def get_inputs():
    shape = (batch, heads, seq, head_dim)
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    freqs = torch.outer(torch.arange(seq, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    q, k = torch.randn(shape), torch.randn(shape)
    return [q, k, emb.cos(), emb.sin(), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
