"""SwiGLU's gating, forward and backward: y = silu(gate) * up, elementwise.

A training step on the two halves of a gated MLP's projection: from an upstream gradient dy (the last
input), d_up = dy * silu(gate) and d_gate = dy * up * silu'(gate), with silu'(g) = sigmoid(g) * (1 + g *
(1 - sigmoid(g))). Memory-bound: one pass can read gate, up and dy and write y and both gradients."""

import torch
import torch.nn as nn

num_tokens = 8192
hidden = 8192

KBENCH_PRESETS = {"small": {"num_tokens": 128, "hidden": 256}}
KBENCH_TAGS = ["training", "glu", "elementwise-chain"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0, 1]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(gate) * up


def get_inputs():
    shape = (num_tokens, hidden)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
