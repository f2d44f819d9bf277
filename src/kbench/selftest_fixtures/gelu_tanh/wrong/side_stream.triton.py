# expect: cheat wallclock-disagreement | cheat timing-output-mismatch | cheat beyond-speed-of-light | mismatch | ok
# warns: static:streams
# requires: gpu
# Launches on a side stream the timing events are not recorded on.
# ok is acceptable only with the streams warning: the timer synchronizes the whole device, so the
# side stream's work is inside the host clock's time; the events may see almost none of it, below
# speed-of-light (beyond-speed-of-light: what H200 runs of this and the cuda version gave).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    t = 2.0 * tl.sigmoid(2.0 * inner) - 1.0  # tanh(z) = 2 sigmoid(2z) - 1
    tl.store(y_ptr + offs, 0.5 * x * (1.0 + t), mask=mask)


def gelu_tanh(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    gelu_tanh_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = torch.cuda.Stream()

    def forward(self, x):
        with torch.cuda.stream(self.side):
            return gelu_tanh(x)
