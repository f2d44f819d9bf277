"""LayerNorm over the last (hidden) dimension with a learned affine transform."""

import torch
import torch.nn as nn

batch_size = 32
seq_len = 4096
hidden = 4096

KBENCH_PRESETS = {"small": {"batch_size": 2, "seq_len": 33, "hidden": 96}}
KBENCH_TAGS = ["norm"]


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.ln = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
