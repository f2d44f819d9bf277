"""KL divergence KL(targets || predictions) between row distributions, one value per row."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# Per row, not the batch mean: a scalar carries one rounding error, which the loss computed in fp16
# keeps within a 1e-4 tolerance on roughly one seed in three (kbench verify --trivial).
batch_size = 32768
num_classes = 8192

KBENCH_PRESETS = {"small": {"batch_size": 16, "num_classes": 251}}
KBENCH_TAGS = ["loss", "reduction"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="none").sum(dim=1)


def get_inputs():
    return [
        torch.randn(batch_size, num_classes).softmax(dim=-1),
        torch.randn(batch_size, num_classes).softmax(dim=-1),
    ]


def get_init_inputs():
    return []
