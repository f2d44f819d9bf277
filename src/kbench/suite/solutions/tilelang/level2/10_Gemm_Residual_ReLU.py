# Square linear + residual + ReLU as one TileLang GEMM: the bias add, the residual add (x read again at
# the output's position, features_in == features_out) and the ReLU run in the matmul's epilogue.
# Precision: T.gemm on fp32 operands runs TF32 tensor-core MMAs on sm_90 (TileLang 0.1.15 lowers fp32 A/B
# to mma.sync tf32: 10 mantissa bits an input). Emulated on the CPU at K=4096, a TF32 Linear needs a
# tolerance of 1.7e-3, 17x the problem's fp32 one (1e-4). So each K-tile is split into hi = x with its 13
# low mantissa bits cleared (exact in TF32) and lo = x - hi (exact in fp32), and three TF32 GEMMs add
# lo*hi + hi*lo + hi*hi into the fp32 accumulator (3xTF32; the dropped lo*lo is ~2^-22 relative): emulated,
# 1.7e-6, as plain fp32, at a third of TF32's tensor-core rate.

import tilelang
import tilelang.language as T
import torch
import torch.nn as nn
from tilelang.backend.target import determine_target
from tilelang.env import env

BLOCK_M, BLOCK_N, BLOCK_K, STAGES, THREADS = 128, 128, 32, 2, 256
TF32_HI = 0xFFFFE000  # sign, exponent and the 10 mantissa bits TF32 keeps


def _tile_tools():
    """(operand tile scope, accumulator scope, 2-D loop over tiles). TileLang 0.1.15 lowers T.gemm to CUDA
    from "shared" operand tiles into a "local.fragment" accumulator (spread over the block's threads,
    walked in T.Parallel loops); its C target (the CPU path: T.gemm as a scalar triple loop) takes one
    dynamic shared buffer at most and reduces only "local" buffers walked by serial loops, so there every
    tile is "local". Same math either way."""
    target = determine_target(env.get_default_target(), return_object=True)
    if target.kind.name == "c":
        return "local", "local", T.grid
    return "shared.dyn", "local.fragment", T.Parallel


def _build(m: int, n: int, k: int):
    tile, scope, loop = _tile_tools()

    @T.prim_func
    def linear_residual_relu(
        x: T.Tensor((m, k), "float32"),
        w: T.Tensor((n, k), "float32"),
        bias: T.Tensor((n,), "float32"),
        out: T.Tensor((m, n), "float32"),
    ):
        with T.Kernel(T.ceildiv(n, BLOCK_N), T.ceildiv(m, BLOCK_M), threads=THREADS) as (bx, by):
            x_tile = T.alloc_shared((BLOCK_M, BLOCK_K), "float32", scope=tile)
            w_tile = T.alloc_shared((BLOCK_N, BLOCK_K), "float32", scope=tile)
            x_hi = T.alloc_shared((BLOCK_M, BLOCK_K), "float32", scope=tile)
            x_lo = T.alloc_shared((BLOCK_M, BLOCK_K), "float32", scope=tile)
            w_hi = T.alloc_shared((BLOCK_N, BLOCK_K), "float32", scope=tile)
            w_lo = T.alloc_shared((BLOCK_N, BLOCK_K), "float32", scope=tile)
            acc = T.alloc_fragment((BLOCK_M, BLOCK_N), "float32", scope=scope)
            T.clear(acc)
            for kt in T.Pipelined(T.ceildiv(k, BLOCK_K), num_stages=STAGES):
                T.copy(x[by * BLOCK_M, kt * BLOCK_K], x_tile)
                T.copy(w[bx * BLOCK_N, kt * BLOCK_K], w_tile)
                for i, j in loop(BLOCK_M, BLOCK_K):
                    hi = T.reinterpret(T.reinterpret(x_tile[i, j], "uint32") & TF32_HI, "float32")
                    x_hi[i, j] = hi
                    x_lo[i, j] = x_tile[i, j] - hi
                for i, j in loop(BLOCK_N, BLOCK_K):
                    hi = T.reinterpret(T.reinterpret(w_tile[i, j], "uint32") & TF32_HI, "float32")
                    w_hi[i, j] = hi
                    w_lo[i, j] = w_tile[i, j] - hi
                T.gemm(x_lo, w_hi, acc, transpose_B=True)
                T.gemm(x_hi, w_lo, acc, transpose_B=True)
                T.gemm(x_hi, w_hi, acc, transpose_B=True)
            for i, j in loop(BLOCK_M, BLOCK_N):
                r = by * BLOCK_M + i
                c = bx * BLOCK_N + j
                if r < m and c < n:
                    out[r, c] = T.max(acc[i, j] + bias[c] + x[r, c], 0.0)

    return tilelang.compile(linear_residual_relu, out_idx=[3])


_KERNELS: dict[tuple[int, int, int], object] = {}


def _kernel(m: int, n: int, k: int):
    if (m, n, k) not in _KERNELS:
        _KERNELS[(m, n, k)] = _build(m, n, k)
    return _KERNELS[(m, n, k)]


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        return _kernel(x.shape[0], w.shape[0], w.shape[1])(x, w, self.linear.bias)
