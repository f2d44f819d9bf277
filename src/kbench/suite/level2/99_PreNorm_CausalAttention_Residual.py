"""Pre-norm transformer attention sub-block: x + out_proj(causal_attention(qkv(LayerNorm(x))))."""

import math

import torch
import torch.nn as nn

batch_size = 8
seq_len = 1024
embed_dim = 1024
num_heads = 16

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 19, "embed_dim": 64, "num_heads": 4}}
KBENCH_TAGS = ["attention", "residual", "norm-act"]


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.norm = nn.LayerNorm(embed_dim)
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        d = e // self.num_heads
        q, k, v = self.qkv(self.norm(x)).view(b, s, 3, self.num_heads, d).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
        mask = torch.triu(torch.ones(s, s, device=x.device), diagonal=1).bool()
        attn = torch.matmul(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), v)
        return x + self.out_proj(attn.transpose(1, 2).reshape(b, s, e))


def get_inputs():
    return [torch.randn(batch_size, seq_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
