"""Cross-attention block: queries from x, keys and values from a context sequence, output projection."""

import math

import torch
import torch.nn as nn

batch_size = 8
query_len = 1024
context_len = 1024
embed_dim = 1024
num_heads = 16

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "query_len": 13, "context_len": 21, "embed_dim": 64, "num_heads": 4}
}
KBENCH_TAGS = ["attention", "gemm-epilogue"]


class Model(nn.Module):
    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.kv_proj = nn.Linear(embed_dim, 2 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        b, s, e = x.shape
        d = e // self.num_heads
        q = self.q_proj(x).view(b, s, self.num_heads, d).transpose(1, 2)
        k, v = self.kv_proj(context).view(b, context.shape[1], 2, self.num_heads, d).permute(2, 0, 3, 1, 4)
        weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d), dim=-1)
        return self.out_proj(torch.matmul(weights, v).transpose(1, 2).reshape(b, s, e))


def get_inputs():
    return [torch.randn(batch_size, query_len, embed_dim), torch.randn(batch_size, context_len, embed_dim)]


def get_init_inputs():
    return [embed_dim, num_heads]
