"""A deep, narrow MLP: eight Linear + ReLU layers of equal width, then a linear output layer."""

import torch
import torch.nn as nn

# 9 GEMMs of 4096 x 2048 x 2048: 2.5e11 FLOP.
batch_size = 4096
input_size = 2048
hidden_size = 2048
num_hidden_layers = 8
output_size = 1024

KBENCH_PRESETS = {
    "small": {
        "batch_size": 64,
        "input_size": 48,
        "hidden_size": 32,
        "num_hidden_layers": 4,
        "output_size": 40,
    }
}
KBENCH_TAGS = ["architecture", "mlp", "gemm-epilogue"]


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_hidden_layers: int, output_size: int):
        super().__init__()
        layers: list[nn.Module] = []
        width = input_size
        for _ in range(num_hidden_layers):
            layers += [nn.Linear(width, hidden_size), nn.ReLU()]
            width = hidden_size
        layers.append(nn.Linear(width, output_size))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_hidden_layers, output_size]
