"""Huber (smooth-L1) loss with delta 0.5: quadratic near zero, linear beyond, averaged per row."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# Per row, not the batch mean: a scalar carries one rounding error, which the loss computed in fp16
# keeps within a 1e-4 tolerance on roughly one seed in three;
# and at the full size the mean of 2^28 terms moves by ~1e-4 of itself between seeds, so a constant
# would pass too (kbench verify --trivial).
batch_size = 32768
dim = 8192
delta = 0.5

KBENCH_PRESETS = {"small": {"batch_size": 16, "dim": 263}}
KBENCH_TAGS = ["loss", "reduction"]
# One value per row of ~1-2: the fp16 computation needs only ~2e-4 at the small size (its rounding over
# 1 + |out|), within 2x of the default 1e-4 (kbench verify --trivial).
KBENCH_TOLERANCE = {"fp32": 5e-5}


class Model(nn.Module):
    def __init__(self, delta: float):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta, reduction="none").mean(dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [delta]
