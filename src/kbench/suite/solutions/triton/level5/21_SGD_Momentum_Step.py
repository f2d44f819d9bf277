"""SGD with momentum and weight decay (dampening 0, no Nesterov) as one Triton kernel: each element's
parameter, gradient and momentum buffer are read once and the new parameter and buffer written once
(eager: mul, add, mul, add, mul, sub, each a pass over memory with its own temporary).

buf = momentum * buf + (grad + weight_decay * param); param = param - lr * buf.
The inputs are never written: the kernel stores into two new tensors."""

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK, WARPS = 2048, 8  # elements a program, 8 floats a thread: four 128-bit loads per tensor


@triton.jit
def sgd_momentum_kernel(
    p_ptr, g_ptr, b_ptr, p_out, b_out, n, lr, momentum, weight_decay, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    buf = tl.load(b_ptr + offs, mask=mask, other=0.0)
    buf = buf * momentum + (g + weight_decay * p)
    tl.store(p_out + offs, p - lr * buf, mask=mask)
    tl.store(b_out + offs, buf, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, lr: float, momentum: float, weight_decay: float):
        super().__init__()
        self.lr, self.momentum, self.weight_decay = lr, momentum, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, momentum_buffer: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        param, grad, momentum_buffer = param.contiguous(), grad.contiguous(), momentum_buffer.contiguous()
        n = param.numel()
        p_out, b_out = torch.empty_like(param), torch.empty_like(momentum_buffer)
        sgd_momentum_kernel[(triton.cdiv(n, BLOCK),)](
            param, grad, momentum_buffer, p_out, b_out, n, self.lr, self.momentum, self.weight_decay,
            BLOCK=BLOCK, num_warps=WARPS,
        )
        return p_out, b_out
