"""Log-softmax over classes followed by the negative log-likelihood of each target."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# Per row, not the batch mean: a scalar carries one rounding error, which the loss computed in fp16
# keeps within a 1e-4 tolerance on roughly one seed in three (kbench verify --trivial).
batch_size = 32768
num_classes = 8192

KBENCH_PRESETS = {"small": {"batch_size": 64, "num_classes": 200}}
KBENCH_TAGS = ["softmax", "reduction-chain", "loss"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.nll_loss(torch.log_softmax(logits, dim=1), targets, reduction="none")


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
