"""Cosine-similarity loss: mean over rows of 1 - cos(predictions, targets)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 65536
dim = 4096

KBENCH_PRESETS = {"small": {"batch_size": 32, "dim": 129}}
KBENCH_TAGS = ["loss", "reduction"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(1.0 - F.cosine_similarity(predictions, targets, dim=1))


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
