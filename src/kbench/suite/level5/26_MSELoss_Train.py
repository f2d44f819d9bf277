"""Mean squared error, forward and backward: loss = mean((pred - target)^2), a scalar.

A training step from the loss itself (no upstream gradient): the loss and the gradient of pred,
2 (pred - target) / numel."""

import torch
import torch.nn as nn

# 32768 x 4096 = 2^27 elements: 512 MiB per tensor (pred, target, the gradient).
batch_size = 32768
dim = 4096

KBENCH_PRESETS = {"small": {"batch_size": 128, "dim": 200}}
KBENCH_TAGS = ["training", "loss", "reduction"]
KBENCH_TRAINING = {"upstream": 0, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.mean((pred - target) ** 2)


def get_inputs():
    target = torch.randn(batch_size, dim)
    # the error's scale drawn per input set: a mean over 2^27 squares of one scale is the same number
    # to ~1e-4 for any input, so a constant would pass as the loss
    noise = 0.5 + torch.rand(())
    return [target + noise * torch.randn(batch_size, dim), target]


def get_init_inputs():
    return []
