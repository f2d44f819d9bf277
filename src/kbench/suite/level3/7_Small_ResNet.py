"""A ResNet-18-style network: conv stem, four stages of two basic blocks, global pooling, classifier."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16
image_size = 224
base_width = 64
num_classes = 1000

KBENCH_PRESETS = {"small": {"batch_size": 2, "image_size": 32, "base_width": 4, "num_classes": 10}}
KBENCH_TAGS = ["architecture", "cnn", "residual"]
KBENCH_TOLERANCE = {"fp32": 1e-3}


class BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class Model(nn.Module):
    def __init__(self, base_width: int, num_classes: int):
        super().__init__()
        w = base_width
        self.stem = nn.Sequential(
            nn.Conv2d(3, w, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(w),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )
        blocks: list[nn.Module] = []
        in_ch = w
        for i, out_ch in enumerate([w, 2 * w, 4 * w, 8 * w]):
            blocks += [BasicBlock(in_ch, out_ch, 1 if i == 0 else 2), BasicBlock(out_ch, out_ch, 1)]
            in_ch = out_ch
        self.stages = nn.Sequential(*blocks)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [base_width, num_classes]
