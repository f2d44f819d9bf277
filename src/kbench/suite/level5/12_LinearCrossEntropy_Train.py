"""A language model's head and its loss, forward and backward: cross_entropy(hidden @ W^T, targets), mean.

hidden (N, d) times the output embedding W (V, d) gives the logits (N, V); the loss is the mean over rows
of logsumexp(logits) - logits[target]. The step's backward starts from the scalar loss (no upstream
gradient) and gives the gradients of hidden (dlogits @ W) and of W (dlogits^T @ hidden), with dlogits =
(softmax(logits) - onehot(target)) / N. The logits and their gradient are N x V floats (512 MiB at the
full size): a fused kernel computes the step in chunks of the vocabulary, never holding all logits or their
gradient, keeping each row's running max and sum (online logsumexp) for the loss and recomputing a chunk's
logits in the backward."""

import torch
import torch.nn as nn

num_tokens = 4096
dim = 2048
vocab = 32768

KBENCH_PRESETS = {"small": {"num_tokens": 128, "dim": 64, "vocab": 512}}
KBENCH_TAGS = ["training", "cross-entropy", "loss", "gemm-epilogue"]
KBENCH_TRAINING = {"upstream": 0, "grad_inputs": [0]}


class Model(nn.Module):
    def __init__(self, dim: int, vocab: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab, dim) * dim**-0.5)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(hidden @ self.weight.t(), targets)


def get_inputs():
    return [torch.randn(num_tokens, dim), torch.randint(0, vocab, (num_tokens,))]


def get_init_inputs():
    return [dim, vocab]
