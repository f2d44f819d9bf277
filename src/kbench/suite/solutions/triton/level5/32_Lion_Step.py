"""One Lion step as a single Triton pass: each program reads a block of param, grad and exp_avg once and
writes the new parameter and the new momentum from registers (3 reads, 2 writes per element, the
minimum). Eager runs the interpolation, the sign, the decay and the momentum update as about eight
separate elementwise kernels, each streaming its operands through memory again."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def lion_kernel(
    param_ptr, grad_ptr, avg_ptr, new_param_ptr, new_avg_ptr, n,
    lr, beta1, beta2, decay, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(param_ptr + offs, mask=mask, other=0.0)
    g = tl.load(grad_ptr + offs, mask=mask, other=0.0)
    m = tl.load(avg_ptr + offs, mask=mask, other=0.0)
    c = m * beta1 + g * (1.0 - beta1)
    update = tl.where(c > 0, 1.0, tl.where(c < 0, -1.0, 0.0))
    tl.store(new_param_ptr + offs, p * decay - lr * update, mask=mask)
    tl.store(new_avg_ptr + offs, m * beta2 + g * (1.0 - beta2), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, lr: float, beta1: float, beta2: float, weight_decay: float):
        super().__init__()
        self.lr, self.beta1, self.beta2, self.weight_decay = lr, beta1, beta2, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        param, grad, exp_avg = param.contiguous(), grad.contiguous(), exp_avg.contiguous()
        n = param.numel()
        new_param, new_avg = torch.empty_like(param), torch.empty_like(exp_avg)
        lion_kernel[(triton.cdiv(n, BLOCK),)](
            param, grad, exp_avg, new_param, new_avg, n,
            self.lr, self.beta1, self.beta2, 1.0 - self.lr * self.weight_decay, BLOCK=BLOCK,
        )
        return new_param, new_avg
