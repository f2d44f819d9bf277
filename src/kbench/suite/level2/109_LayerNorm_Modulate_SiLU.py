"""Adaptive LayerNorm (DiT-style): non-affine LayerNorm, per-sample scale and shift, then SiLU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
seq_len = 4096
dim = 2048

KBENCH_PRESETS = {"small": {"batch_size": 3, "seq_len": 17, "dim": 96}}
KBENCH_TAGS = ["norm-act", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(x) * (1.0 + scale.unsqueeze(1)) + shift.unsqueeze(1))


def get_inputs():
    return [
        torch.randn(batch_size, seq_len, dim),
        torch.randn(batch_size, dim) * 0.1,
        torch.randn(batch_size, dim) * 0.1,
    ]


def get_init_inputs():
    return [dim]
