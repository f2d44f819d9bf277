"""A small C3D-style video net: four 3x3x3 conv + ReLU stages with 3D max-pooling, global pool, classifier."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# The first conv output is 8 x 32 x 16 x 112 x 112 fp32 = 196 MiB.
batch_size = 8
frames = 16
image_size = 112
base_width = 32
num_classes = 400

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "frames": 4, "image_size": 16, "base_width": 4, "num_classes": 10}
}
KBENCH_TAGS = ["architecture", "cnn", "conv-epilogue"]


class Model(nn.Module):
    def __init__(self, base_width: int, num_classes: int):
        super().__init__()
        w = base_width
        self.conv1 = nn.Conv3d(3, w, 3, padding=1)
        self.conv2 = nn.Conv3d(w, 2 * w, 3, padding=1)
        self.conv3 = nn.Conv3d(2 * w, 4 * w, 3, padding=1)
        self.conv4 = nn.Conv3d(4 * w, 4 * w, 3, padding=1)
        self.fc = nn.Linear(4 * w, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool3d(F.relu(self.conv1(x)), (1, 2, 2))  # keep time resolution early, as C3D does
        x = F.max_pool3d(F.relu(self.conv2(x)), 2)
        x = F.max_pool3d(F.relu(self.conv3(x)), 2)
        x = F.relu(self.conv4(x))
        return self.fc(x.mean(dim=(2, 3, 4)))


def get_inputs():
    return [torch.randn(batch_size, 3, frames, image_size, image_size)]


def get_init_inputs():
    return [base_width, num_classes]
