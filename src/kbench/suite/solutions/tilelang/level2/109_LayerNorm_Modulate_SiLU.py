# Adaptive LayerNorm + per-sample modulation + SiLU as one TileLang row kernel: each block holds whole rows
# of x in registers (one read), reduces the mean and then the centred variance (two passes over registers,
# as torch does), applies its sample's scale and shift and the SiLU, and writes once. SiLU's exp is `expf`
# through T.call_extern: TileLang 0.1.15's C target (the CPU path) has no lowering for T.exp, and expf is
# also a CUDA device function, so one source serves both targets.

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn
from tilelang.backend.target import determine_target
from tilelang.env import env

THREADS = 128


def _row_layout(n: int) -> tuple[int, int]:
    """(padded row length, rows a block): rows padded to a multiple of the threads; about 4096 floats a
    block, so at dim 2048 (the full preset) a block keeps two rows, 32 values a thread."""
    padded = -(-n // THREADS) * THREADS
    return padded, max(1, min(8, 4096 // padded))


def _row_tools():
    """(buffer scope, 2-D loop) of the row buffers. TileLang 0.1.15 lowers T.reduce_* to CUDA over
    "local.fragment" buffers written in T.Parallel loops (a row split across the block's threads), and to C
    (the CPU target) only over "local" buffers, which must be walked with serial loops; same math either way."""
    target = determine_target(env.get_default_target(), return_object=True)
    return ("local", T.grid) if target.kind.name == "c" else ("local.fragment", T.Parallel)


def _build(batch: int, seq: int, n: int, eps: float):
    m = batch * seq
    padded, rows = _row_layout(n)
    scope, loop = _row_tools()

    @T.prim_func
    def layernorm_modulate_silu(
        x: T.Tensor((m, n), "float32"),
        scale: T.Tensor((batch, n), "float32"),
        shift: T.Tensor((batch, n), "float32"),
        out: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(T.ceildiv(m, rows), threads=THREADS) as bx:
            v = T.alloc_fragment((rows, padded), "float32", scope=scope)
            sq = T.alloc_fragment((rows, padded), "float32", scope=scope)
            total = T.alloc_fragment((rows,), "float32", scope=scope)
            sumsq = T.alloc_fragment((rows,), "float32", scope=scope)
            for i, j in loop(rows, padded):
                r = bx * rows + i
                v[i, j] = T.if_then_else((r < m) & (j < n), x[r, j], 0.0)
            T.reduce_sum(v, total, dim=1)
            for i, j in loop(rows, padded):
                d = v[i, j] - total[i] / n
                sq[i, j] = T.if_then_else(j < n, d * d, 0.0)
            T.reduce_sum(sq, sumsq, dim=1)
            for i, j in loop(rows, padded):
                r = bx * rows + i
                if r < m and j < n:
                    b = r // seq
                    normed = (v[i, j] - total[i] / n) * T.rsqrt(sumsq[i] / n + eps)
                    y = normed * (1.0 + scale[b, j]) + shift[b, j]
                    out[r, j] = y / (1.0 + T.call_extern("float32", "expf", -y))

    return tilelang.compile(layernorm_modulate_silu, out_idx=[3])


_KERNELS: dict[tuple[int, int, int, float], object] = {}


def _kernel(batch: int, seq: int, n: int, eps: float):
    key = (batch, seq, n, eps)
    if key not in _KERNELS:
        _KERNELS[key] = _build(*key)
    return _KERNELS[key]


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        kernel = _kernel(batch, seq, dim, self.norm.eps)
        return kernel(x.reshape(-1, dim), scale, shift).view(x.shape)
