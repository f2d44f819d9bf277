"""One fused AdamW update, as torch.optim.AdamW computes it for step `step` (bias corrections included).

The forward is the functional update: from the parameters, their gradients and the two moment buffers it
returns the new parameters and the new buffers (new tensors: the inputs are not changed).
    exp_avg    <- beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq <- beta2 * exp_avg_sq + (1 - beta2) * grad^2
    param      <- param * (1 - lr * weight_decay)
                  - lr / (1 - beta1^step) * exp_avg / (sqrt(exp_avg_sq / (1 - beta2^step)) + eps)"""

import math

import torch
import torch.nn as nn

# 2^25 parameters (a flattened group of them): 128 MiB per tensor, 4 read and 3 written.
num_params = 33554432
step = 10
lr = 1e-2
beta1 = 0.9
beta2 = 0.999
eps = 1e-8
# lr * weight_decay = 1e-3: an update that skipped the decay would be off by 1e-3 of |param|, 10x the
# fp32 tolerance (with the usual 1e-3 x 1e-2 it would pass unnoticed).
weight_decay = 0.1

KBENCH_PRESETS = {"small": {"num_params": 40000}}
KBENCH_TAGS = ["optimizer"]


class Model(nn.Module):
    def __init__(self, step: int, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float):
        super().__init__()
        self.step, self.lr, self.beta1, self.beta2 = step, lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        exp_avg = torch.lerp(exp_avg, grad, 1 - self.beta1)
        exp_avg_sq = exp_avg_sq * self.beta2 + (1 - self.beta2) * grad * grad
        bias_correction1 = 1 - self.beta1**self.step
        bias_correction2 = 1 - self.beta2**self.step
        denom = exp_avg_sq.sqrt() / math.sqrt(bias_correction2) + self.eps
        param = param * (1 - self.lr * self.weight_decay) - (self.lr / bias_correction1) * exp_avg / denom
        return param, exp_avg, exp_avg_sq


def get_inputs():
    # moments of the scale step 10 leaves them at (exp_avg_sq ~ (1 - beta2^10) * grad^2): the bias
    # corrections matter and the update is ~lr in size
    return [
        torch.randn(num_params),
        torch.randn(num_params),
        0.5 * torch.randn(num_params),
        0.01 * (torch.rand(num_params) + 0.5),
    ]


def get_init_inputs():
    return [step, lr, beta1, beta2, eps, weight_decay]
