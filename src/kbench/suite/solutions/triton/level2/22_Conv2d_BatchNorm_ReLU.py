"""Conv2d + BatchNorm (training mode) + ReLU: cuDNN convolution without its bias, one Triton program per
channel for the batch statistics (centered two-pass; it also updates the running statistics) and one
elementwise Triton kernel that normalizes and applies ReLU in place. The conv bias cancels in the output;
it only shifts the running mean, where it is added back (eager: conv + bias + batch_norm + relu)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def batch_stats_kernel(y_ptr, cb_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, ss_ptr, n, channels, hw, eps, momentum,
                       BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n):
        plane = y_ptr + (i * channels + c).to(tl.int64) * hw
        for start in range(0, hw, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            acc += tl.load(plane + offs, mask=offs < hw, other=0.0)
    count = n * hw
    mean = tl.sum(acc, axis=0) / count
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in range(0, n):
        plane = y_ptr + (i * channels + c).to(tl.int64) * hw
        for start in range(0, hw, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            mask = offs < hw
            d = tl.where(mask, tl.load(plane + offs, mask=mask) - mean, 0.0)
            acc += d * d
    m2 = tl.sum(acc, axis=0)
    scale = tl.load(w_ptr + c) / tl.sqrt(m2 / count + eps)
    tl.store(ss_ptr + c, scale)
    tl.store(ss_ptr + channels + c, tl.load(b_ptr + c) - mean * scale)
    tl.store(rm_ptr + c, (1.0 - momentum) * tl.load(rm_ptr + c) + momentum * (mean + tl.load(cb_ptr + c)))
    tl.store(rv_ptr + c, (1.0 - momentum) * tl.load(rv_ptr + c) + momentum * m2 / tl.maximum(count - 1, 1))


@triton.jit
def normalize_relu_kernel(y_ptr, ss_ptr, total, hw, channels, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c = (offs // hw) % channels
    v = tl.load(y_ptr + offs, mask=mask) * tl.load(ss_ptr + c, mask=mask) + tl.load(ss_ptr + channels + c, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(v, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        bn = self.batch_norm
        conv_bias = y.new_zeros(y.shape[1])  # the conv has no bias; the kernels take one
        scale_shift = torch.empty(2 * c, device=y.device, dtype=y.dtype)
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            batch_stats_kernel[(c,)](
                y, conv_bias, bn.weight, bn.bias, bn.running_mean, bn.running_var, scale_shift,
                n, c, h * w, bn.eps, bn.momentum, BLOCK=1024,
            )
        total = y.numel()
        normalize_relu_kernel[(triton.cdiv(total, 1024),)](y, scale_shift, total, h * w, c, BLOCK=1024)
        return y
