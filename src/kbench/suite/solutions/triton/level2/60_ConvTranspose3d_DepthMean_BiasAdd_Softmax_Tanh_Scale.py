"""ConvTranspose3d + mean over depth + bias + softmax over channels + tanh + scale, with the depth axis of the
transposed convolution removed by an exact rewrite. With stride 1 along depth, output depth o receives x[i]
through depth tap k exactly when o = i - pad + k, so summing the output over depth gives, for each tap k, the
input summed over the depths i whose o stays inside the output:

    sum_o y[n, :, o] = conv_transpose2d(A, W'),  A[n, k * Cin + i] = sum_{d in range_k} x[n, i, d],
    W'[k * Cin + i, o] = W[i, o, k]

(range_k is all depths but the first for k = 0 and all but the last for k = 2 at the problem's padding 1).
Three steps:
1. a Triton kernel reads x once (134 MB at the full size) and writes the K depth-aggregated planes per input
   channel (25 MB);
2. cuDNN runs the remaining 2-D transposed convolution: 7.2 GFLOP instead of 116 (16x fewer, the depth), IEEE
   fp32 as the reference; its 17 MB output is the depth sum;
3. one Triton kernel holds a [channels x pixels] tile in registers, divides by the depth, adds both biases,
   takes the softmax over the channels and writes tanh(p) * scale in place.
Eager runs the full 3-D transposed convolution (a 268 MB output), the mean, add, softmax, tanh and mul. The
summation order differs from the 3-D convolution's (fp32 throughout).
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
2.4e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    # tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)): one exp, no overflow for large |x|
    t = tl.exp(-2.0 * tl.abs(x))
    r = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, r, -r)


@triton.jit
def depth_aggregate_kernel(x_ptr, a_ptr, cin, depth, hw, dout, pad, K: tl.constexpr, KP: tl.constexpr,
                           BP: tl.constexpr):
    # program (sample * cin + channel, pixel block): A[n, k * cin + i, p] = sum over the depths d with
    # 0 <= d - pad + k < dout of x[n, i, d, p]
    row = tl.program_id(0)
    p = tl.program_id(1) * BP + tl.arange(0, BP)
    pmask = p < hw
    k = tl.arange(0, KP)
    lo = pad - k  # first depth that tap k maps inside the output
    hi = dout - 1 + pad - k  # last one
    src = x_ptr + row.to(tl.int64) * depth * hw + p
    acc = tl.zeros([KP, BP], dtype=tl.float32)
    for d in range(0, depth):
        v = tl.load(src + d * hw, mask=pmask, other=0.0)
        acc += tl.where(((lo <= d) & (d <= hi))[:, None], v[None, :], 0.0)
    n = row // cin
    i = row % cin
    dst = a_ptr + ((n * K + k[:, None]) * cin + i).to(tl.int64) * hw + p[None, :]
    tl.store(dst, acc, mask=(k < K)[:, None] & pmask[None, :])


@triton.jit
def mean_bias_softmax_tanh_kernel(s_ptr, cb_ptr, b_ptr, channels, hw, inv_depth, scale,
                                  BC: tl.constexpr, BP: tl.constexpr):
    n = tl.program_id(0)
    c = tl.arange(0, BC)
    p = tl.program_id(1) * BP + tl.arange(0, BP)
    cmask = c < channels
    mask = cmask[:, None] & (p < hw)[None, :]
    ptr = s_ptr + n.to(tl.int64) * channels * hw + c[:, None] * hw + p[None, :]
    bias = tl.load(cb_ptr + c, mask=cmask, other=0.0) + tl.load(b_ptr + c, mask=cmask, other=0.0)
    v = tl.load(ptr, mask=mask, other=0.0) * inv_depth + bias[:, None]
    v = tl.where(cmask[:, None], v, float("-inf"))
    e = tl.exp(v - tl.max(v, axis=0)[None, :])
    prob = e / tl.sum(e, axis=0)[None, :]
    tl.store(ptr, _tanh(prob) * scale, mask=mask)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        padding: int,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, padding=padding)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        assert ct.stride[0] == 1 and ct.dilation[0] == 1 and ct.output_padding[0] == 0 and ct.groups == 1
        x = x.contiguous()
        n, cin, depth, h, w = x.shape
        kd = ct.kernel_size[0]
        pad = ct.padding[0]
        dout = depth - 1 + kd - 2 * pad
        agg = torch.empty((n, kd * cin, h, w), device=x.device, dtype=x.dtype)
        bp = min(1024, triton.next_power_of_2(h * w))
        depth_aggregate_kernel[(n * cin, triton.cdiv(h * w, bp))](
            x, agg, cin, depth, h * w, dout, pad, K=kd, KP=triton.next_power_of_2(kd), BP=bp
        )
        # W'[k * cin + i, o, kh, kw] = W[i, o, k, kh, kw]: a 2-D transposed convolution over the aggregates
        w2 = ct.weight.permute(2, 0, 1, 3, 4).reshape(kd * cin, ct.out_channels, *ct.kernel_size[1:])
        s = F.conv_transpose2d(agg, w2, None, ct.stride[1:], ct.padding[1:], ct.output_padding[1:]).contiguous()
        c, oh, ow = s.shape[1:]
        bc = triton.next_power_of_2(c)
        bp = max(1, min(triton.next_power_of_2(oh * ow), 4096 // bc))
        mean_bias_softmax_tanh_kernel[(n, triton.cdiv(oh * ow, bp))](
            s, ct.bias, self.bias, c, oh * ow, 1.0 / dout, self.scale, BC=bc, BP=bp
        )
        return s.view(n, c, 1, oh, ow)
