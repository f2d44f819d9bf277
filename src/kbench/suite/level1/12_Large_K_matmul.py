"""C = A @ B with a small output (M, N) and a very long reduction dimension K (split-K territory)."""

import torch
import torch.nn as nn

# 2*M*N*K = 6.9e10 FLOP over a 256 x 256 output; A and B are 512 MiB each.
M = 256
N = 256
K = 524288

KBENCH_PRESETS = {"small": {"M": 24, "N": 20, "K": 4099}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
