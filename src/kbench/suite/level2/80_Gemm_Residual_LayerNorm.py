"""Square linear layer plus its input (residual), then LayerNorm (post-norm)."""

import torch
import torch.nn as nn

batch_size = 4096
features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 21, "features": 96}}
KBENCH_TAGS = ["gemm-epilogue", "residual", "norm-act"]


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.layer_norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer_norm(x + self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
