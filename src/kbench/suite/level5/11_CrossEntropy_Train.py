"""Cross-entropy of logits against integer targets, mean over the rows, forward and backward.

loss = mean over rows of (logsumexp(logits) - logits[target]); the step's backward starts from the scalar
loss (no upstream gradient) and gives the gradient of the logits, (softmax(logits) - onehot(target)) / N.
One pass per row can keep its max and sum (online softmax) and a second write the gradient."""

import torch
import torch.nn as nn

num_rows = 4096
vocab = 32768

KBENCH_PRESETS = {"small": {"num_rows": 128, "vocab": 512}}
KBENCH_TAGS = ["training", "loss", "softmax"]
KBENCH_TRAINING = {"upstream": 0, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits, targets)


def get_inputs():
    return [2.0 * torch.randn(num_rows, vocab), torch.randint(0, vocab, (num_rows,))]


def get_init_inputs():
    return []
