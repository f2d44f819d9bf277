import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256


# The whole operator chain in one kernel: each element is read once and written once.
@cute.kernel
def gelu_kernel(gX: cute.Tensor, gY: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        v = gX[i]
        inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)  # sqrt(2 / pi) * (x + 0.044715 x^3)
        gY[i] = 0.5 * v * (1.0 + cute.math.tanh(inner))  # fp32 throughout, as the reference


@cute.jit
def gelu_host(mX: cute.Tensor, mY: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    blocks = (n + THREADS - 1) // THREADS
    gelu_kernel(mX, mY, n).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.compiled = {}  # cute.compile once per (numel, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        mx, my = from_dlpack(x.view(-1)), from_dlpack(y.view(-1))
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        key = (n, x.dtype)
        if key not in self.compiled:
            self.compiled[key] = cute.compile(gelu_host, mx, my, n, stream)
        self.compiled[key](mx, my, n, stream)
        return y
