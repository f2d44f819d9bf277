"""Cosine-similarity loss per row (no reduction over the batch): 1 - cos(predictions, targets).

Per row, not the batch mean: at the full size the mean of 1 - cos over 65536 random pairs is 1.0 to
within 1e-5 on every seed, so a kernel returning a constant would pass.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 65536
dim = 4096

KBENCH_PRESETS = {"small": {"batch_size": 32, "dim": 129}}
KBENCH_TAGS = ["loss", "reduction"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return 1.0 - F.cosine_similarity(predictions, targets, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
