"""Three stacked linear layers with ReLU between them."""

import torch
import torch.nn as nn

batch_size = 2048
in_features = 4096
hidden = 4096
out_features = 1024

KBENCH_PRESETS = {"small": {"batch_size": 19, "in_features": 64, "hidden": 96, "out_features": 40}}
KBENCH_TAGS = ["mlp"]


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
