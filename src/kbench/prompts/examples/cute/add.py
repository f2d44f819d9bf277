import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

THREADS = 256


# The device kernel: one thread per element, the last block's spare threads masked off by `i < n`.
@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        gC[i] = gA[i] + gB[i]


# The host function: launches the kernel on the caller's stream.
@cute.jit
def add_host(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, n: cutlass.Int32, stream: cuda.CUstream):
    blocks = (n + THREADS - 1) // THREADS
    add_kernel(mA, mB, mC, n).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.compiled = {}  # cute.compile once per (numel, dtype); later calls reuse it

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        c = torch.empty_like(a)
        n = a.numel()
        args = [from_dlpack(t.view(-1)) for t in (a, b, c)]
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        key = (n, a.dtype)
        if key not in self.compiled:
            self.compiled[key] = cute.compile(add_host, *args, n, stream)
        self.compiled[key](*args, n, stream)
        return c
