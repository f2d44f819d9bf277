"""y = A @ x for a large matrix A and a column vector x (memory-bound GEMV)."""

import torch
import torch.nn as nn

# A is 32768 x 32768 fp32 = 4 GiB: one read of A is ~1.3 ms at 3.3 TB/s.
M = 32768
K = 32768

KBENCH_PRESETS = {"small": {"M": 1025, "K": 257}}
KBENCH_TAGS = ["matmul"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, x)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, 1)]


def get_init_inputs():
    return []
