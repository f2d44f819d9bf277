import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


# tilelang.jit: calling the factory compiles its prim_func once per distinct arguments (kept in memory)
# and returns the kernel; out_idx=[2]: the kernel allocates `out` and returns it
@tilelang.jit(out_idx=[2])
def add_kernel(n: int, dtype: str, block: int = 1024):
    @T.prim_func
    def add(a: T.Tensor[(n,), dtype], b: T.Tensor[(n,), dtype], out: T.Tensor[(n,), dtype]):
        # one block of 1024 elements per program; the guard masks the last, partial block
        with T.Kernel(T.ceildiv(n, block), threads=256) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    out[bx * block + i] = a[bx * block + i] + b[bx * block + i]

    return add


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        kernel = add_kernel(a.numel(), str(a.dtype).removeprefix("torch."))
        return kernel(a.view(-1), b.view(-1)).view(a.shape)
