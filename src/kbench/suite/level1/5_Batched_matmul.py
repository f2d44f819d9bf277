"""Batched matrix multiplication: C[b] = A[b] @ B[b] with torch.bmm."""

import torch
import torch.nn as nn

batch_size = 128
m = 512
k = 1024
n = 512

KBENCH_PRESETS = {"small": {"batch_size": 5, "m": 33, "k": 40, "n": 29}}
KBENCH_TAGS = ["matmul"]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    return [torch.randn(batch_size, m, k), torch.randn(batch_size, k, n)]


def get_init_inputs():
    return []
