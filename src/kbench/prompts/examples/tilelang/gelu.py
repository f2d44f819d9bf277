from typing import Any

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn


def gelu_tanh_kernel(m: int, n: int, dtype: str, block_m: int = 4, block_n: int = 256):
    @T.prim_func
    def gelu_tanh(x: T.Tensor[(m, n), dtype], out: T.Tensor[(m, n), dtype]):
        with T.Kernel(T.ceildiv(n, block_n), T.ceildiv(m, block_m), threads=128) as (bx, by):
            for i, j in T.Parallel(block_m, block_n):
                row, col = by * block_m + i, bx * block_n + j
                if row < m and col < n:
                    v = T.cast(x[row, col], "float32")  # compute in fp32 whatever the input's dtype
                    inner = 0.7978845608028654 * (
                        v + 0.044715 * v * v * v
                    )  # sqrt(2 / pi) * (x + 0.044715 x^3)
                    out[row, col] = T.cast(0.5 * v * (1.0 + T.tanh(inner)), dtype)

    return tilelang.compile(gelu_tanh, out_idx=[1])


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.kernels: dict[tuple[int, int, torch.dtype], Any] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, n = x.numel() // x.shape[-1], x.shape[-1]
        key = (m, n, x.dtype)
        if key not in self.kernels:  # one compile per shape and dtype
            self.kernels[key] = gelu_tanh_kernel(m, n, str(x.dtype).removeprefix("torch."))
        return self.kernels[key](x.view(m, n)).view(x.shape)
