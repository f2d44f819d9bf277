"""Integer-valued GEMM dequantized with per-row (activation) and per-column (weight) scales, plus bias."""

import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096

KBENCH_PRESETS = {"small": {"batch_size": 33, "in_features": 64, "out_features": 48}}
KBENCH_TAGS = ["gemm-epilogue", "elementwise-chain"]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # int8-range values stored as fp32: sums of 4096 random products are ~1e5-1e6, below 2**24, so fp32
        # accumulates them exactly in any order (and int8 or bf16 tensor cores can compute them exactly too)
        self.weight_q = nn.Parameter(torch.randint(-127, 128, (out_features, in_features)).float())
        self.weight_scale = nn.Parameter(torch.rand(out_features) * 0.01 + 0.001)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x_q: torch.Tensor, x_scale: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x_q, self.weight_q.t()) * x_scale * self.weight_scale + self.bias


def get_inputs():
    return [
        torch.randint(-127, 128, (batch_size, in_features)).float(),
        torch.rand(batch_size, 1) * 0.01 + 0.001,
    ]


def get_init_inputs():
    return [in_features, out_features]
