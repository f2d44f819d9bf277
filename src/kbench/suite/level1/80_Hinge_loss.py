"""Hinge loss per row: mean of max(1 - predictions * targets, 0) with targets in {-1, +1}."""

import torch
import torch.nn as nn

# Per row, not the batch mean: a scalar carries one rounding error, which the loss computed in fp16
# keeps within a 1e-4 tolerance on roughly one seed in three;
# and at the full size the mean of 2^28 terms moves by ~1e-4 of itself between seeds, so a constant
# would pass too (kbench verify --trivial).
batch_size = 16384
dim = 16384

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 263}}
KBENCH_TAGS = ["loss", "reduction"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1.0 - predictions * targets, min=0.0), dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randint(0, 2, (batch_size, dim)).float() * 2.0 - 1.0]


def get_init_inputs():
    return []
