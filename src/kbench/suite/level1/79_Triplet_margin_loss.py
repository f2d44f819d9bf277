"""Triplet margin loss per sample: max(d(a, p) - d(a, n) + margin, 0) with Euclidean distances."""

import torch
import torch.nn as nn

# Per row, not the batch mean: a scalar carries one rounding error, which the loss computed in fp16
# keeps within a 1e-4 tolerance on roughly one seed in three (kbench verify --trivial).
batch_size = 98304
dim = 2048
margin = 1.0

KBENCH_PRESETS = {"small": {"batch_size": 64, "dim": 67}}
KBENCH_TAGS = ["loss", "reduction"]


class Model(nn.Module):
    def __init__(self, margin: float):
        super().__init__()
        self.loss = nn.TripletMarginLoss(margin=margin, reduction="none")

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return self.loss(anchor, positive, negative)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [margin]
