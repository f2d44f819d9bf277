"""LeNet-5 on 32x32 grey images: two conv + ReLU + max-pool stages and three linear layers."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# The first conv output is 32768 x 6 x 28 x 28 fp32 = 588 MiB; the net is tiny per image.
batch_size = 32768
num_classes = 10

KBENCH_PRESETS = {"small": {"batch_size": 64}}
KBENCH_TAGS = ["architecture", "cnn"]


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, kernel_size=5)
        self.conv2 = nn.Conv2d(6, 16, kernel_size=5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = x.flatten(1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def get_inputs():
    return [torch.randn(batch_size, 1, 32, 32)]


def get_init_inputs():
    return [num_classes]
