"""Causal scaled dot-product attention (F.scaled_dot_product_attention with is_causal=True)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 4 * B * H * S^2 * D = 1.4e11 FLOP; a materialised score matrix would be 2 GiB.
batch_size = 8
num_heads = 16
seq_len = 2048
head_dim = 64

KBENCH_PRESETS = {"small": {"batch_size": 2, "num_heads": 3, "seq_len": 37, "head_dim": 16}}
KBENCH_TAGS = ["attention", "softmax"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
