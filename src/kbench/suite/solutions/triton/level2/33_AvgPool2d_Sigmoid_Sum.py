"""AvgPool2d + sigmoid + spatial sum: one Triton program per (sample, channel) plane pools each window in
registers, applies sigmoid and reduces; the pooled map is never written (eager: avg_pool2d + sigmoid +
sum)."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def avgpool_sigmoid_sum_kernel(x_ptr, out_ptr, h, w, k, BLOCK: tl.constexpr):
    plane = x_ptr + tl.program_id(0).to(tl.int64) * h * w
    ph = h // k
    pw = w // k
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, ph * pw, BLOCK):
        p = start + tl.arange(0, BLOCK)
        mask = p < ph * pw
        base = (p // pw) * k * w + (p % pw) * k
        s = tl.zeros([BLOCK], dtype=tl.float32)
        for dr in range(0, k):
            for dc in range(0, k):
                s += tl.load(plane + base + dr * w + dc, mask=mask, other=0.0)
        acc += tl.where(mask, tl.sigmoid(s / (k * k)), 0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n, c, h, w = x.shape
        out = torch.empty((n, c), device=x.device, dtype=x.dtype)
        avgpool_sigmoid_sum_kernel[(n * c,)](x, out, h, w, int(self.kernel_size), BLOCK=1024)
        return out
