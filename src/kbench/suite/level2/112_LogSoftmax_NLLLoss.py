"""Log-softmax over classes followed by the mean negative log-likelihood of targets."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 8192

KBENCH_PRESETS = {"small": {"batch_size": 64, "num_classes": 200}}
KBENCH_TAGS = ["softmax", "reduction-chain", "loss"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.nll_loss(torch.log_softmax(logits, dim=1), targets)


def get_inputs():
    return [torch.randn(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []
