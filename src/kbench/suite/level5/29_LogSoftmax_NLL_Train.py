"""Log-softmax and class-weighted negative log-likelihood, forward and backward, as F.nll_loss averages it.

loss = sum_i w[t_i] * -log_softmax(logits_i)[t_i] / sum_i w[t_i], for integer targets t and per-class
weights w (an input, not trained). A training step from the loss itself (no upstream gradient): the loss
and the gradient of the logits."""

import torch
import torch.nn as nn
import torch.nn.functional as F

# 4096 rows over 32768 classes: 512 MiB logits, and as much for the log-probabilities and each gradient.
batch_size = 4096
num_classes = 32768

KBENCH_PRESETS = {"small": {"batch_size": 64, "num_classes": 300}}
KBENCH_TAGS = ["training", "softmax", "loss"]
KBENCH_TRAINING = {"upstream": 0, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(
        self, logits: torch.Tensor, targets: torch.Tensor, class_weights: torch.Tensor
    ) -> torch.Tensor:
        return F.nll_loss(F.log_softmax(logits, dim=-1), targets, weight=class_weights)


def get_inputs():
    return [
        2.0 * torch.randn(batch_size, num_classes),
        torch.randint(0, num_classes, (batch_size,)),
        0.5 + torch.rand(num_classes),
    ]


def get_init_inputs():
    return []
