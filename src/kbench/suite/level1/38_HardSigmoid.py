"""HardSigmoid: relu6(x + 3) / 6."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 128
channels = 64
height = 256
width = 256

KBENCH_PRESETS = {"small": {"batch_size": 2, "channels": 5, "height": 21, "width": 23}}
KBENCH_TAGS = ["activation"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardsigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return []
