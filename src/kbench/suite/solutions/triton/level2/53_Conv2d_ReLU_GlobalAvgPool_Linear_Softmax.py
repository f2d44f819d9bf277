"""Classifier head, conv + ReLU + global average pool + Linear + softmax: cuDNN convolution without its bias,
then two Triton kernels:
1. one program per (sample, channel) plane adds the bias, applies ReLU and averages: the 403 MB conv output
   (full size) is read once and the activation never written;
2. one program per sample computes the logits from the pooled vector (the 1000 x 256 weight is L2 resident),
   keeps a running max and rescaled sum (online softmax) and writes the probabilities.
Eager adds the bias (read + write), runs relu (read + write) and mean (read), then addmm and softmax.

The convolution (116 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
3.7e-9."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def bias_relu_mean_kernel(y_ptr, b_ptr, pooled_ptr, channels, hw, BLOCK: tl.constexpr):
    plane = tl.program_id(0)
    base = y_ptr + plane.to(tl.int64) * hw
    b = tl.load(b_ptr + plane % channels)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < hw
        acc += tl.where(mask, tl.maximum(tl.load(base + offs, mask=mask, other=0.0) + b, 0.0), 0.0)
    tl.store(pooled_ptr + plane, tl.sum(acc, axis=0) / hw)


@triton.jit
def linear_softmax_kernel(pooled_ptr, w_ptr, b_ptr, out_ptr, channels, classes,
                          BN: tl.constexpr, BK: tl.constexpr):
    # program (sample): logits = W p + b, written raw in a first sweep, normalized in a second
    n = tl.program_id(0)
    row = out_ptr + n * classes
    m = tl.full([BN], float("-inf"), tl.float32)
    s = tl.zeros([BN], dtype=tl.float32)
    for j0 in range(0, classes, BN):
        j = j0 + tl.arange(0, BN)
        jmask = j < classes
        acc = tl.zeros([BN, BK], dtype=tl.float32)
        for k0 in range(0, channels, BK):
            k = k0 + tl.arange(0, BK)
            kmask = k < channels
            pk = tl.load(pooled_ptr + n * channels + k, mask=kmask, other=0.0)
            wt = tl.load(w_ptr + j[:, None] * channels + k[None, :], mask=jmask[:, None] & kmask[None, :], other=0.0)
            acc += wt * pk[None, :]
        logit = tl.sum(acc, axis=1) + tl.load(b_ptr + j, mask=jmask, other=0.0)
        tl.store(row + j, logit, mask=jmask)
        logit = tl.where(jmask, logit, float("-inf"))
        m_new = tl.maximum(m, logit)
        s = s * tl.exp(tl.where(m_new == float("-inf"), 0.0, m - m_new)) + tl.where(jmask, tl.exp(logit - m_new), 0.0)
        m = m_new
    mb = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(tl.where(m == float("-inf"), 0.0, s * tl.exp(m - mb)), axis=0)
    for j0 in range(0, classes, BN):
        j = j0 + tl.arange(0, BN)
        jmask = j < classes
        tl.store(row + j, tl.exp(tl.load(row + j, mask=jmask) - mb) * inv, mask=jmask)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc = nn.Linear(out_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        n, c, h, w = y.shape
        pooled = torch.empty(n * c, device=y.device, dtype=torch.float32)
        bias_relu_mean_kernel[(n * c,)](y, self.conv.bias, pooled, c, h * w, BLOCK=min(2048, triton.next_power_of_2(h * w)))
        classes = self.fc.out_features
        out = torch.empty((n, classes), device=y.device, dtype=y.dtype)
        linear_softmax_kernel[(n,)](pooled, self.fc.weight, self.fc.bias, out, c, classes, BN=64, BK=64)
        return out
