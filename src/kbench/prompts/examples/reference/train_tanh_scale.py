import torch
import torch.nn as nn

batch_size = 8192
dim = 4096

KBENCH_PRESETS = {"small": {"batch_size": 9, "dim": 130}}
KBENCH_TRAINING = {"upstream": 1, "grad_inputs": [0]}


class Model(nn.Module):
    """A learned per-channel scale of tanh(x), trained: the forward and its backward are both judged."""

    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x) * self.scale


def get_inputs():
    # x, then the upstream gradient of the output (not an input of forward)
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
