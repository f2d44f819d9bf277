import torch
import torch.nn as nn

batch_size = 1024
in_features = 4096
out_features = 2048
negative_slope = 0.1

KBENCH_PRESETS = {"small": {"batch_size": 33, "in_features": 70, "out_features": 45}}


class Model(nn.Module):
    """Linear layer (GEMM + bias) followed by LeakyReLU."""

    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.leaky_relu(self.linear(x), self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, negative_slope]
