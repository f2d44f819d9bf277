"""Hinge loss: mean of max(1 - predictions * targets, 0) with targets in {-1, +1}."""

import torch
import torch.nn as nn

batch_size = 16384
dim = 16384

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 263}}
KBENCH_TAGS = ["loss", "reduction"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1.0 - predictions * targets, min=0.0))


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 2, (batch_size, dim)).float() * 2.0 - 1.0]


def get_init_inputs():
    return []
