"""Gemm_ReLU (kbench:2/1) that never returns: runs its Triton kernel, holds 2 GiB of GPU memory, then spins
in forward (for benchmarks/kill_hang.py). Starts a child, 'sleep 307', once it hangs."""

import subprocess

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(y_ptr, b_ptr, out_ptr, n_cols, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(y_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(out_ptr + offs, tl.maximum(y + b, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.matmul(x, self.linear.weight.t()).contiguous()
        out = torch.empty_like(y)
        n = y.numel()
        bias_relu_kernel[(triton.cdiv(n, 1024),)](y, self.linear.bias, out, y.shape[1], n, BLOCK=1024)
        self.held = torch.empty(2 << 30, dtype=torch.uint8, device=x.device)
        torch.cuda.synchronize()
        subprocess.Popen(["sleep", "307"])
        while True:
            pass
