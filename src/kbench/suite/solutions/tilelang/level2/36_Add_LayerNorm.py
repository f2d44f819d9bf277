# Residual add + LayerNorm as one TileLang row kernel: each block holds whole rows of x + residual in
# registers (one read of each input), reduces the mean and then the centred variance (two passes over
# registers, as torch does, not E[x^2] - mean^2, which loses digits when |mean| >> std) and writes once.

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn
from tilelang.backend.target import determine_target
from tilelang.env import env

THREADS = 128


def _row_layout(n: int) -> tuple[int, int]:
    """(padded row length, rows a block): rows padded to a multiple of the threads; about 4096 floats a
    block, so at dim 4096 (the full preset) each thread keeps 32 values of one row."""
    padded = -(-n // THREADS) * THREADS
    return padded, max(1, min(8, 4096 // padded))


def _row_tools():
    """(buffer scope, 2-D loop) of the row buffers. TileLang 0.1.15 lowers T.reduce_* to CUDA over
    "local.fragment" buffers written in T.Parallel loops (a row split across the block's threads), and to C
    (the CPU target) only over "local" buffers, which must be walked with serial loops; same math either way."""
    target = determine_target(env.get_default_target(), return_object=True)
    return ("local", T.grid) if target.kind.name == "c" else ("local.fragment", T.Parallel)


def _build(m: int, n: int, eps: float):
    padded, rows = _row_layout(n)
    scope, loop = _row_tools()

    @T.prim_func
    def add_layernorm(
        x: T.Tensor((m, n), "float32"),
        residual: T.Tensor((m, n), "float32"),
        gamma: T.Tensor((n,), "float32"),
        beta: T.Tensor((n,), "float32"),
        out: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(T.ceildiv(m, rows), threads=THREADS) as bx:
            v = T.alloc_fragment((rows, padded), "float32", scope=scope)
            sq = T.alloc_fragment((rows, padded), "float32", scope=scope)
            total = T.alloc_fragment((rows,), "float32", scope=scope)
            sumsq = T.alloc_fragment((rows,), "float32", scope=scope)
            for i, j in loop(rows, padded):
                r = bx * rows + i
                v[i, j] = T.if_then_else((r < m) & (j < n), x[r, j] + residual[r, j], 0.0)
            T.reduce_sum(v, total, dim=1)
            for i, j in loop(rows, padded):
                d = v[i, j] - total[i] / n
                sq[i, j] = T.if_then_else(j < n, d * d, 0.0)
            T.reduce_sum(sq, sumsq, dim=1)
            for i, j in loop(rows, padded):
                r = bx * rows + i
                if r < m and j < n:
                    inv_std = T.rsqrt(sumsq[i] / n + eps)
                    out[r, j] = (v[i, j] - total[i] / n) * inv_std * gamma[j] + beta[j]

    return tilelang.compile(add_layernorm, out_idx=[4])


_KERNELS: dict[tuple[int, int, float], object] = {}


def _kernel(m: int, n: int, eps: float):
    if (m, n, eps) not in _KERNELS:
        _KERNELS[(m, n, eps)] = _build(m, n, eps)
    return _KERNELS[(m, n, eps)]


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        dim = x.shape[-1]
        ln = self.layer_norm
        x2, r2 = x.reshape(-1, dim), residual.reshape(-1, dim)
        out = _kernel(x2.shape[0], dim, ln.eps)(x2, r2, ln.weight, ln.bias)
        return out.view(x.shape)
