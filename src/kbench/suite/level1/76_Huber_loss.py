"""Huber (smooth-L1) loss with delta 0.5: quadratic near zero, linear beyond, averaged to a scalar."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
dim = 8192
delta = 0.5

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 263}}
KBENCH_TAGS = ["loss", "reduction"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self, delta: float):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [delta]
