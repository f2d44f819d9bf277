# Per-feature scale and bias, sigmoid and clamp as one TileLang elementwise kernel: one read of x, one write.
# exp is `expf` through T.call_extern: TileLang 0.1.15's C target (the CPU path) has no lowering for T.exp,
# and expf is also a CUDA device function, so one source serves both targets.

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn

BLOCK_M, BLOCK_N, THREADS = 16, 256, 256  # 4096 elements a block: 16 per thread


def _build(m: int, n: int):
    @T.prim_func
    def scale_bias_sigmoid_clamp(
        x: T.Tensor((m, n), "float32"),
        scale: T.Tensor((n,), "float32"),
        bias: T.Tensor((n,), "float32"),
        out: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(T.ceildiv(n, BLOCK_N), T.ceildiv(m, BLOCK_M), threads=THREADS) as (bx, by):
            for i, j in T.Parallel(BLOCK_M, BLOCK_N):
                r = by * BLOCK_M + i
                c = bx * BLOCK_N + j
                if r < m and c < n:
                    y = x[r, c] * scale[c] + bias[c]
                    s = 1.0 / (1.0 + T.call_extern("float32", "expf", -y))
                    out[r, c] = T.min(T.max(s, 0.1), 0.9)

    return tilelang.compile(scale_bias_sigmoid_clamp, out_idx=[3])


_KERNELS: dict[tuple[int, int], object] = {}


def _kernel(m: int, n: int):
    if (m, n) not in _KERNELS:
        _KERNELS[(m, n)] = _build(m, n)
    return _KERNELS[(m, n)]


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        out = _kernel(*x2.shape)(x2, self.scale, self.bias)
        return out.view(x.shape)
