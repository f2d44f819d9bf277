"""GeGLU's gating, forward and backward: y = gelu(gate) * up, elementwise, with the exact (erf) GELU.

A training step: from an upstream gradient dy (the last input), d_up = dy * gelu(gate) and d_gate = dy * up
* gelu'(gate), with gelu'(g) = Phi(g) + g * phi(g) (the normal distribution's CDF and density).
Memory-bound: one pass can read gate, up and dy and write y and both gradients."""

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
        return torch.nn.functional.gelu(gate) * up


def get_inputs():
    shape = (num_tokens, hidden)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return []
