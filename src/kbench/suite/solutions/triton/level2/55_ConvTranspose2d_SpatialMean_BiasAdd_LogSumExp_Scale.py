"""ConvTranspose2d + spatial mean + bias + logsumexp over channels + scale, with the transposed convolution
removed by an exact rewrite. With stride 1 and no padding every input pixel reaches every kernel tap inside
the output, so the sum over the output plane is linear in the input plane sums:

    sum_{h,w} y[n, o] = sum_i (sum_{h,w} x[n, i]) * (sum_{kh,kw} W[i, o, kh, kw])

Two Triton kernels:
1. one program per (sample, input channel) plane sums the input (the only pass over memory: 201 MB at the full
   size, ~45 us of HBM time on the H200);
2. one program per sample forms the channel means from the plane sums and the tap-summed weights (a 64 x 128
   contraction), adds both biases, and writes scale * logsumexp over the channels.
The 116 GFLOP transposed convolution and its 415 MB output never exist; eager runs both, then mean, add,
logsumexp and mul. The summation order differs from the convolution's (fp32 throughout); the tolerance is
1e-3.
Max abs error vs the fp32 reference, small preset, over the evaluator's seeds (CPU, Triton interpreter):
3.8e-6."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def plane_sum_kernel(x_ptr, sum_ptr, hw, BLOCK: tl.constexpr):
    plane = x_ptr + tl.program_id(0).to(tl.int64) * hw
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, hw, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(plane + offs, mask=offs < hw, other=0.0)
    tl.store(sum_ptr + tl.program_id(0), tl.sum(acc, axis=0))


@triton.jit
def mean_lse_kernel(sum_ptr, w_ptr, cb_ptr, b_ptr, out_ptr, cin, cout, kk, inv_area, scale,
                    BI: tl.constexpr, BO: tl.constexpr, BK: tl.constexpr):
    # program (sample): m_o = inv_area * sum_i s_i * sum_k W[i, o, k] + cb_o + b_o; out = scale * lse_o(m_o)
    n = tl.program_id(0)
    o = tl.arange(0, BO)
    omask = o < cout
    acc = tl.zeros([BO], dtype=tl.float32)
    for i0 in range(0, cin, BI):
        i = i0 + tl.arange(0, BI)
        imask = i < cin
        s = tl.load(sum_ptr + n * cin + i, mask=imask, other=0.0)
        wsum = tl.zeros([BI, BO], dtype=tl.float32)
        for k0 in range(0, kk, BK):
            k = k0 + tl.arange(0, BK)
            mask = imask[:, None, None] & omask[None, :, None] & (k < kk)[None, None, :]
            ptr = w_ptr + (i[:, None, None] * cout + o[None, :, None]) * kk + k[None, None, :]
            wsum += tl.sum(tl.load(ptr, mask=mask, other=0.0), axis=2)
        acc += tl.sum(wsum * s[:, None], axis=0)
    m = acc * inv_area + tl.load(cb_ptr + o, mask=omask, other=0.0) + tl.load(b_ptr + o, mask=omask, other=0.0)
    m = tl.where(omask, m, float("-inf"))
    mx = tl.max(m, axis=0)
    lse = mx + tl.log(tl.sum(tl.exp(m - mx), axis=0))
    tl.store(out_ptr + n, lse * scale)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, scale: float, bias_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        # the rewrite needs every tap of every input pixel inside the output
        assert ct.stride == (1, 1) and ct.padding == (0, 0) and ct.output_padding == (0, 0)
        assert ct.dilation == (1, 1) and ct.groups == 1
        x = x.contiguous()
        n, cin, h, w = x.shape
        kh, kw = ct.kernel_size
        cout = ct.out_channels
        sums = torch.empty(n * cin, device=x.device, dtype=torch.float32)
        plane_sum_kernel[(n * cin,)](x, sums, h * w, BLOCK=min(4096, triton.next_power_of_2(h * w)))
        out = torch.empty((n, 1, 1, 1), device=x.device, dtype=x.dtype)
        bo = triton.next_power_of_2(cout)
        bk = triton.next_power_of_2(kh * kw)
        mean_lse_kernel[(n,)](
            sums, ct.weight, ct.bias, self.bias, out, cin, cout, kh * kw, 1.0 / ((h + kh - 1) * (w + kw - 1)),
            self.scale, BI=max(1, 4096 // (bo * bk)), BO=bo, BK=bk,
        )
        return out
