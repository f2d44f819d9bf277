"""Softplus with beta 2.0: log(1 + exp(beta * x)) / beta, linear above the threshold."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 65536
beta = 2.0

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 257}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self, beta: float):
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [beta]
