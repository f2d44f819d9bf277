"""ELU with alpha 1.5: x for x > 0, alpha * (exp(x) - 1) otherwise."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
seq_len = 4096
hidden = 1024
alpha = 1.5

KBENCH_PRESETS = {"small": {"batch_size": 3, "seq_len": 37, "hidden": 48}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [alpha]
