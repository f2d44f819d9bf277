"""AdamW's update as one Triton kernel: each element's parameter, gradient and both moments are read once and
the new parameter and moments written once (eager: lerp, mul, addcmul, sqrt, div, add, mul and sub, each a
pass over memory with its own temporary).

The bias corrections and the decay factor are scalars computed once on the host in double:
m = lerp(m, g, 1 - beta1), v = beta2 v + (1 - beta2) g^2,
p = p (1 - lr wd) - lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
The inputs are never written: the kernel stores into three new tensors."""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK, WARPS = 2048, 8  # elements a program, 8 floats a thread: four 128-bit loads per tensor


@triton.jit
def adamw_kernel(
    p_ptr, g_ptr, m_ptr, v_ptr, p_out, m_out, v_out, n,
    decay, w1, beta2, w2, step_size, inv_sqrt_bc2, eps,
    BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0)
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    m = m + w1 * (g - m)  # torch.lerp(m, g, w1) for w1 < 0.5
    v = v * beta2 + w2 * g * g
    denom = tl.sqrt(v) * inv_sqrt_bc2 + eps
    p = p * decay - step_size * m / denom
    tl.store(p_out + offs, p, mask=mask)
    tl.store(m_out + offs, m, mask=mask)
    tl.store(v_out + offs, v, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, step: int, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float):
        super().__init__()
        self.step, self.lr, self.beta1, self.beta2 = step, lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay

    def forward(
        self, param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        param, grad = param.contiguous(), grad.contiguous()
        exp_avg, exp_avg_sq = exp_avg.contiguous(), exp_avg_sq.contiguous()
        n = param.numel()
        p_out, m_out, v_out = torch.empty_like(param), torch.empty_like(exp_avg), torch.empty_like(exp_avg_sq)
        bias_correction1 = 1 - self.beta1**self.step
        bias_correction2 = 1 - self.beta2**self.step
        adamw_kernel[(triton.cdiv(n, BLOCK),)](
            param, grad, exp_avg, exp_avg_sq, p_out, m_out, v_out, n,
            1 - self.lr * self.weight_decay, 1 - self.beta1, self.beta2, 1 - self.beta2,
            self.lr / bias_correction1, 1 / math.sqrt(bias_correction2), self.eps,
            BLOCK=BLOCK, num_warps=WARPS,
        )
        return p_out, m_out, v_out
