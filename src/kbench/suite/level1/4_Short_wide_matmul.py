"""C = A @ B where the output is short and wide: few rows, very many columns."""

import torch
import torch.nn as nn

# 2*M*K*N = 6.9e10 FLOP; B is 4096 x 65536 fp32 = 1 GiB.
M = 128
K = 4096
N = 65536

KBENCH_PRESETS = {"small": {"M": 8, "K": 64, "N": 1031}}
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
