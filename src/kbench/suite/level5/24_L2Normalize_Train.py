"""L2 normalization along the last dimension, forward and backward: y = x / max(||x||_2, eps).

A training step: the gradient of x from an upstream gradient dy (the last input)."""

import torch
import torch.nn as nn

# 32768 rows of 2048: 256 MiB per tensor (x, dy, y, dx).
num_rows = 32768
dim = 2048
eps = 1e-12

KBENCH_PRESETS = {"small": {"num_rows": 128, "dim": 200}}
KBENCH_TAGS = ["training", "norm", "reduction-chain"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, eps: float):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True).clamp_min(self.eps)


def get_inputs():
    return [torch.randn(num_rows, dim), torch.randn(num_rows, dim)]


def get_init_inputs():
    return [eps]
