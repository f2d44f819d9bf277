"""RMSNorm of x with a learned weight, multiplied by SiLU of a gate tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 12288
dim = 8192
eps = 1e-6

KBENCH_PRESETS = {"small": {"batch_size": 31, "dim": 136}}
KBENCH_TAGS = ["norm-act", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        rms = x * torch.rsqrt(torch.mean(x**2, dim=-1, keepdim=True) + self.eps) * self.weight
        return rms * F.silu(g)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, eps]
