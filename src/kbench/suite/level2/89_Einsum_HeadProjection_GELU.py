"""Per-head projection written as an einsum (bshd,hde->bshe), then GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8
seq_len = 2048
num_heads = 8
head_dim = 512
out_dim = 512

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 17, "num_heads": 3, "head_dim": 32, "out_dim": 24}}
KBENCH_TAGS = ["gemm-epilogue", "activation"]


class Model(nn.Module):
    def __init__(self, num_heads: int, head_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_heads, head_dim, out_dim) / head_dim**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(torch.einsum("bshd,hde->bshe", x, self.weight))


def get_inputs():
    return [torch.randn(batch_size, seq_len, num_heads, head_dim)]


def get_init_inputs():
    return [num_heads, head_dim, out_dim]
