"""C = A @ B where A is tall and skinny (M >> K): many rows, a short reduction."""

import torch
import torch.nn as nn

# 2*M*K*N = 6.9e10 FLOP; output 131072 x 1024 fp32 = 512 MiB.
M = 131072
K = 256
N = 1024

KBENCH_PRESETS = {"small": {"M": 1021, "K": 16, "N": 24}}
KBENCH_TAGS = ["matmul"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
