"""Linear layer then tanh-approximated GELU, forward and backward: y = gelu_tanh(x @ W^T + b).

A training step, GEMM plus activation backward: from an upstream gradient dy (the last input), dz =
dy * gelu_tanh'(z) then the gradients of x (dz @ W), of the weight (dz^T @ x) and of the bias (dz summed
over the tokens).

dy is drawn at a mean loss's scale (times num_tokens^-1/2), so the gradients summed over the tokens
are O(1): at O(sqrt(num_tokens)) their fp32 rounding near zero would approach the tolerance."""

import torch
import torch.nn as nn

num_tokens = 4096
in_features = 2048
out_features = 4096

KBENCH_PRESETS = {"small": {"num_tokens": 128, "in_features": 96, "out_features": 160}}
KBENCH_TAGS = ["training", "gemm-epilogue", "activation"]
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(self.linear(x), approximate="tanh")


def get_inputs():
    dy = torch.randn(num_tokens, out_features) * num_tokens**-0.5  # a mean loss's scale: dW, db are O(1)
    return [torch.randn(num_tokens, in_features), dy]


def get_init_inputs():
    return [in_features, out_features]
