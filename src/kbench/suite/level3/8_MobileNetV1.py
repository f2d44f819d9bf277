"""A MobileNetV1-style net: a strided stem, then depthwise-separable conv blocks with BN + ReLU."""

import torch
import torch.nn as nn

batch_size = 32
image_size = 224
base_width = 32
num_classes = 1000

KBENCH_PRESETS = {"small": {"batch_size": 2, "image_size": 32, "base_width": 4, "num_classes": 10}}
KBENCH_TAGS = ["architecture", "cnn", "norm-act"]

# (output width multiple of base_width, stride) for each depthwise-separable block.
BLOCKS = [(2, 1), (4, 2), (4, 1), (8, 2), (8, 1), (16, 2), (16, 1), (16, 1), (32, 2), (32, 1)]


def conv_bn_relu(in_ch: int, out_ch: int, kernel: int, stride: int, groups: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_ch),
        nn.ReLU(),
    )


class Model(nn.Module):
    def __init__(self, base_width: int, num_classes: int):
        super().__init__()
        layers = [conv_bn_relu(3, base_width, 3, 2, 1)]
        in_ch = base_width
        for mult, stride in BLOCKS:
            out_ch = mult * base_width
            layers.append(conv_bn_relu(in_ch, in_ch, 3, stride, in_ch))
            layers.append(conv_bn_relu(in_ch, out_ch, 1, 1, 1))
            in_ch = out_ch
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return self.fc(x.mean(dim=(2, 3)))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [base_width, num_classes]
