"""One SGD step with momentum and weight decay, as torch.optim.SGD computes it (dampening 0, no Nesterov).

The forward is the functional update: from the parameters, their gradients and the momentum buffer it
returns the new parameters and the new buffer (new tensors: the inputs are not changed).
    buf   <- momentum * buf + (grad + weight_decay * param)
    param <- param - lr * buf"""

import torch
import torch.nn as nn

# 2^26 parameters (a flattened group of them): 256 MiB per tensor, 3 read and 2 written.
num_params = 67108864
lr = 0.1
momentum = 0.9
# weight_decay * |param| reaches ~5e-3 of the buffer: a step that skipped the decay fails the buffer
weight_decay = 1e-3

KBENCH_PRESETS = {"small": {"num_params": 40000}}
KBENCH_TAGS = ["optimizer"]


class Model(nn.Module):
    def __init__(self, lr: float, momentum: float, weight_decay: float):
        super().__init__()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, momentum_buffer: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        d_p = grad + self.weight_decay * param
        buf = momentum_buffer * self.momentum + d_p
        return param - self.lr * buf, buf


def get_inputs():
    return [torch.randn(num_params), torch.randn(num_params), torch.randn(num_params)]


def get_init_inputs():
    return [lr, momentum, weight_decay]
