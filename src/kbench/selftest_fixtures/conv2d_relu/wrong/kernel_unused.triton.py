# expect: cheat no-custom-kernel
# Defines the Triton kernel, then calls nn.Conv2d.
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def conv2d_relu_kernel(x_ptr, w_ptr, b_ptr, y_ptr, total, C, H, W, CO, OH, OW,
                       KH: tl.constexpr, KW: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    ow = offs % OW
    t = offs // OW
    oh = t % OH
    t = t // OH
    co = t % CO
    n = t // CO
    acc = tl.load(b_ptr + co, mask=mask, other=0.0)
    for c in range(0, C):
        for u in tl.static_range(KH):
            for v in tl.static_range(KW):
                xv = tl.load(x_ptr + ((n * C + c) * H + oh + u) * W + ow + v, mask=mask, other=0.0)
                wv = tl.load(w_ptr + ((co * C + c) * KH + u) * KW + v, mask=mask, other=0.0)
                acc += xv * wv
    tl.store(y_ptr + offs, tl.maximum(acc, 0.0), mask=mask)


def conv2d_relu(x, w, b):
    x = x.contiguous()
    nb, c, h, wd = x.shape
    co, _, kh, kw = w.shape
    y = torch.empty((nb, co, h - kh + 1, wd - kw + 1), device=x.device, dtype=x.dtype)
    total = y.numel()
    conv2d_relu_kernel[(triton.cdiv(total, 256),)](x, w, b, y, total, c, h, wd, co, h - kh + 1, wd - kw + 1,
                                                   KH=kh, KW=kw, BLOCK=256)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return torch.relu(self.conv(x))
