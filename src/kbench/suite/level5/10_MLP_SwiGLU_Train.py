"""SwiGLU feed-forward, forward and backward: y = down(silu(gate(x)) * up(x)), linears without biases.

A training step: from an upstream gradient dy (the last input), the gradients of x and of the three
weights. The gate and up projections can run as one GEMM, their gating in the epilogues of the forward's
GEMM and of the backward's dy @ W_down.

dy is drawn at a mean loss's scale (times num_tokens^-1/2), so the gradients summed over the tokens
are O(1): at O(sqrt(num_tokens)) their fp32 rounding near zero would approach the tolerance."""

import torch
import torch.nn as nn

num_tokens = 2048
dim = 1024
hidden = 4096

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 96, "hidden": 256}}
KBENCH_TAGS = ["training", "mlp", "glu", "gemm-epilogue"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.nn.functional.silu(self.gate(x)) * self.up(x))


def get_inputs():
    dy = (
        torch.randn(num_tokens, dim) * num_tokens**-0.5
    )  # a mean loss's scale: the weights' gradients are O(1)
    return [torch.randn(num_tokens, dim), dy]


def get_init_inputs():
    return [dim, hidden]
