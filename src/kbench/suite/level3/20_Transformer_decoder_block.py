"""Pre-norm transformer decoder block: causal self-attention, cross-attention to a memory, GELU MLP."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 1024
memory_len = 512
dim = 1024
num_heads = 16
mlp_ratio = 4

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 16, "memory_len": 12, "dim": 64, "num_heads": 4}}
KBENCH_TAGS = ["architecture", "transformer", "attention", "residual"]


class Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int):
        super().__init__()
        self.num_heads = num_heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def heads(self, t: torch.Tensor) -> torch.Tensor:
        b, s, d = t.shape
        return t.view(b, s, self.num_heads, d // self.num_heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, context: torch.Tensor, causal: bool) -> torch.Tensor:
        k, v = self.kv(context).chunk(2, dim=-1)
        out = F.scaled_dot_product_attention(
            self.heads(self.q(x)), self.heads(k), self.heads(v), is_causal=causal
        )
        return self.out(out.transpose(1, 2).reshape(x.shape))


class Model(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: int):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.self_attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.cross_attn = Attention(dim, num_heads)
        self.norm3 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_ratio * dim), nn.GELU(), nn.Linear(mlp_ratio * dim, dim))

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.self_attn(h, h, causal=True)
        x = x + self.cross_attn(self.norm2(x), memory, causal=False)
        return x + self.mlp(self.norm3(x))


def get_inputs():
    return [torch.randn(batch_size, seq_len, dim), torch.randn(batch_size, memory_len, dim)]


def get_init_inputs():
    return [dim, num_heads, mlp_ratio]
