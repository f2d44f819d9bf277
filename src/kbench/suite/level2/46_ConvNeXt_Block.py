"""ConvNeXt block: depthwise 7x7 conv, channels-last LayerNorm, GELU MLP, layer scale, residual."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 64
dim = 128
height = 64
width = 64

KBENCH_PRESETS = {"small": {"batch_size": 2, "dim": 16, "height": 9, "width": 11}}
KBENCH_TAGS = ["conv-epilogue", "mlp", "residual", "norm-act"]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.fc2(F.gelu(self.fc1(self.norm(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


def get_inputs():
    return [torch.randn(batch_size, dim, height, width)]


def get_init_inputs():
    return [dim]
