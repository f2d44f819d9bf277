"""A reduced VGG: four stages of 3x3 conv + ReLU (2, 2, 3, 3 convs) with max-pooling, then a classifier."""

import torch
import torch.nn as nn

batch_size = 32
image_size = 128
base_width = 64
hidden_size = 1024
num_classes = 1000

KBENCH_PRESETS = {
    "small": {"batch_size": 2, "image_size": 32, "base_width": 4, "hidden_size": 32, "num_classes": 10}
}
KBENCH_TAGS = ["architecture", "cnn", "conv-epilogue"]


def conv_stage(in_ch: int, out_ch: int, num_convs: int) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for i in range(num_convs):
        layers += [nn.Conv2d(in_ch if i == 0 else out_ch, out_ch, 3, padding=1), nn.ReLU()]
    layers.append(nn.MaxPool2d(2))
    return layers


class Model(nn.Module):
    def __init__(self, image_size: int, base_width: int, hidden_size: int, num_classes: int):
        super().__init__()
        w = base_width
        self.features = nn.Sequential(
            *conv_stage(3, w, 2),
            *conv_stage(w, 2 * w, 2),
            *conv_stage(2 * w, 4 * w, 3),
            *conv_stage(4 * w, 8 * w, 3),
        )
        flat = 8 * w * (image_size // 16) ** 2
        self.classifier = nn.Sequential(
            nn.Linear(flat, hidden_size), nn.ReLU(), nn.Linear(hidden_size, num_classes)
        )
        # PyTorch's default init leaves each conv's output a sixth of its input's variance (a third of 1/fan_in,
        # halved by the ReLU): after ten convs the logits are the last bias plus ~1e-4 of signal, whatever the
        # input, and another input's output passed as this one's (kbench verify --trivial). He init keeps it.
        for m in self.modules():
            if isinstance(m, nn.Conv2d | nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).flatten(1))


def get_inputs():
    return [torch.randn(batch_size, 3, image_size, image_size)]


def get_init_inputs():
    return [image_size, base_width, hidden_size, num_classes]
