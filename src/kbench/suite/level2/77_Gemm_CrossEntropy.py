"""Linear classifier followed by the per-sample cross-entropy loss against integer targets.

Per sample, not the batch mean: with 4096 classes the mean loss hardly moves when the bias changes, so a
kernel that dropped the bias would pass.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4096
in_features = 4096
num_classes = 4096

KBENCH_PRESETS = {"small": {"batch_size": 64, "in_features": 64, "num_classes": 100}}
KBENCH_TAGS = ["gemm-epilogue", "softmax", "reduction-chain", "loss"]


class Model(nn.Module):
    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.linear(x), targets, reduction="none")


def get_inputs():
    return [torch.randn(batch_size, in_features), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return [in_features, num_classes]
