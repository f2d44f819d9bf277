"""LayerNorm over the last dimension followed by exact (erf) GELU."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
normalized_shape = 8192

KBENCH_PRESETS = {"small": {"batch_size": 29, "normalized_shape": 160}}
KBENCH_TAGS = ["norm-act"]


class Model(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.layer_norm(x))


def get_inputs():
    return [torch.randn(batch_size, normalized_shape)]


def get_init_inputs():
    return [normalized_shape]
