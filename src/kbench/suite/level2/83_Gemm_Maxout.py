"""Maxout: linear layer to out_features * pieces, then the maximum over each group of pieces."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 1024
pieces = 4

KBENCH_PRESETS = {"small": {"batch_size": 16, "in_features": 64, "out_features": 40, "pieces": 3}}
KBENCH_TAGS = ["gemm-epilogue", "reduction-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, pieces: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features * pieces)
        self.pieces = pieces

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        return y.view(y.shape[0], -1, self.pieces).amax(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, pieces]
