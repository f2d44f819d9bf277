"""Linear layer then ReLU, forward and backward: y = relu(x @ W^T + b).

A training step, GEMM plus activation backward: from an upstream gradient dy (the last input), dz =
dy where z > 0 (else 0), then the gradients of x (dz @ W), of the weight (dz^T @ x) and of the bias (dz
summed over the tokens).

The ReLU's mask must not depend on rounding: a pre-activation within an fp32 rounding of zero would flip
its mask between two honest GEMMs and move a row of dx, a row of dW and an entry of db past any tolerance.
So x (a grid of 2^-10) and the weight (a power-of-two grid, about 8 steps per fan-in^-1/2) hold values
whose every product and partial sum is exact in fp32, and the bias sits half a product step off that
grid: z is the same in any summation order and never zero. x needs more bits than TF32, fp16 or bf16
hold, so the forward's GEMM is exact in fp32 (or split into several low-precision parts) only.

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

X_STEP = 2.0**-10  # x's grid


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # weight: multiples of `unit`, about 8 per 1/sqrt(in_features) (std ~ fan-in^-1/2, |w| <= ~44 units)
        unit = 1.0 / (8 * (1 << (round(in_features**0.5).bit_length() - 1)))
        step = unit * X_STEP  # every product's grid, so every sum's too
        self.weight = nn.Parameter(torch.round(8.0 * torch.randn(out_features, in_features)) * unit)
        self.bias = nn.Parameter((torch.round(torch.randn(out_features) * (0.1 / step)) + 0.5) * step)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.nn.functional.linear(x, self.weight, self.bias))


def get_inputs():
    x = torch.round(torch.randn(num_tokens, in_features) / X_STEP) * X_STEP
    dy = torch.randn(num_tokens, out_features) * num_tokens**-0.5  # a mean loss's scale: dW, db are O(1)
    return [x, dy]


def get_init_inputs():
    return [in_features, out_features]
