import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass.cute.runtime import from_dlpack

TILE = 16  # a 16 x 16 block of threads computes a 16 x 16 tile of the output


# GEMM + epilogue in one kernel: thread (m, n) accumulates x[m, :] . w[n, :] in fp32 (FMA, no TF32), then
# adds the bias and applies LeakyReLU before its one store. Threads along x of a block take consecutive n.
@cute.kernel
def gemm_bias_leaky_kernel(
    gX: cute.Tensor, gW: cute.Tensor, gB: cute.Tensor, gOut: cute.Tensor, slope: cutlass.Float32
):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * TILE + ty
    n = bx * TILE + tx
    rows, k_size = gX.shape
    cols = gW.shape[0]
    if m < rows and n < cols:
        acc = cutlass.Float32(0.0)
        for k in cutlass.range(k_size):  # a loop in the kernel, not unrolled at trace time
            acc += gX[m, k] * gW[n, k]
        acc = acc + gB[n]
        out = acc * slope
        if acc > 0.0:  # a runtime branch: the DSL turns an `if` on a device value into one
            out = acc
        gOut[m, n] = out


@cute.jit
def gemm_bias_leaky(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mB: cute.Tensor,
    mOut: cute.Tensor,
    slope: cutlass.Float32,
    stream: cuda.CUstream,
):
    grid = ((mW.shape[0] + TILE - 1) // TILE, (mX.shape[0] + TILE - 1) // TILE, 1)
    gemm_bias_leaky_kernel(mX, mW, mB, mOut, slope).launch(grid=grid, block=(TILE, TILE, 1), stream=stream)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters and init as the reference
        self.negative_slope = negative_slope
        self.compiled = {}  # cute.compile once per (shapes, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        # detached: DLPack refuses a tensor that requires grad (the parameters do, even under no_grad)
        w, b = self.linear.weight.detach().contiguous(), self.linear.bias.detach().contiguous()
        out = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        args = [from_dlpack(t) for t in (x, w, b, out)]
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        key = (tuple(x.shape), tuple(w.shape), x.dtype)
        if key not in self.compiled:
            self.compiled[key] = cute.compile(gemm_bias_leaky, *args, self.negative_slope, stream)
        self.compiled[key](*args, self.negative_slope, stream)
        return out
