"""One Lion update (Chen et al., 2023): the sign of an interpolated momentum, with decoupled weight decay.

The forward is the functional update: from the parameters, their gradients and the momentum it returns
the new parameters and the new momentum (new tensors: the inputs are not changed).
    update  <- sign(beta1 * exp_avg + (1 - beta1) * grad)
    param   <- param * (1 - lr * weight_decay) - lr * update
    exp_avg <- beta2 * exp_avg + (1 - beta2) * grad"""

import torch
import torch.nn as nn

# 2^25 parameters (a flattened group of them): 128 MiB per tensor, 3 read and 2 written.
num_params = 33554432
# lr and lr * weight_decay both 1e-3 of |param|: an update that skipped the sign step or the decay
# would be off by ~10x the fp32 tolerance
lr = 1e-3
beta1 = 0.9
beta2 = 0.99
weight_decay = 1.0

KBENCH_PRESETS = {"small": {"num_params": 40000}}
KBENCH_TAGS = ["optimizer"]


class Model(nn.Module):
    def __init__(self, lr: float, beta1: float, beta2: float, weight_decay: float):
        super().__init__()
        self.lr, self.beta1, self.beta2, self.weight_decay = lr, beta1, beta2, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        update = torch.sign(exp_avg * self.beta1 + grad * (1 - self.beta1))
        param = param * (1 - self.lr * self.weight_decay) - self.lr * update
        return param, exp_avg * self.beta2 + grad * (1 - self.beta2)


def get_inputs():
    exp_avg = torch.randn(num_params)
    # the gradient is drawn through the interpolation it meets: beta1 * exp_avg + (1 - beta1) * grad is
    # `direction`, at least 0.1 from zero, so no rounding of an honest kernel flips the sign of an entry
    # (an entry within an ulp of 0 would change by 2 lr, which no tolerance tells from a skipped update)
    direction = torch.randn(num_params)
    direction = direction + torch.where(direction < 0, -0.1, 0.1)  # an exact 0 (it happens) too
    grad = (direction - beta1 * exp_avg) / (1 - beta1)
    return [torch.randn(num_params), grad, exp_avg]


def get_init_inputs():
    return [lr, beta1, beta2, weight_decay]
