"""Adaptive LayerNorm (DiT-style) + modulation + SiLU in one kernel: a block per row holds the row in
registers (float4 loads when the row length is a multiple of 4), takes the mean and the centered variance
with warp-shuffle block reductions, and writes silu(n * (1 + scale[b]) + shift[b]) with the row's sample's
scale and shift (eager: layer_norm, add, mul, add, silu: five passes over the activation).

Full preset: 65536 rows x 2048 (512 threads, one float4 each): 512 MB read once and written once, the
minimum (~0.25 ms at 4.3 TB/s). Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total. red holds
// 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call may still be reading red
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
  return t;
}

// Column of float j (0..3) of register slot k for the thread: VEC slots are the float4 number
// k * blockDim.x + threadIdx.x (row length a multiple of 4), scalar slots hold 4 floats blockDim.x apart.
// Both are coalesced.
template <bool VEC>
__device__ __forceinline__ int slot_col(int k, int j) {
  return VEC ? ((k * (int)blockDim.x + (int)threadIdx.x) << 2) + j : (k * 4 + j) * (int)blockDim.x + (int)threadIdx.x;
}

// Loads VPT slots of a row of n floats (zeros past its end).
template <int VPT, bool VEC>
__device__ __forceinline__ void load_row(const float* __restrict__ row, int n, float (&v)[VPT][4]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = slot_col<true>(k, 0);
      float4 q = c < n ? *reinterpret_cast<const float4*>(row + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[k][0] = q.x; v[k][1] = q.y; v[k][2] = q.z; v[k][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = slot_col<false>(k, j); v[k][j] = c < n ? row[c] : 0.0f; }
    }
  }
}

template <int VPT, bool VEC>
__global__ void ln_modulate_silu_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                        const float* __restrict__ shift, float* __restrict__ out, int seq,
                                        int dim, float eps) {
  __shared__ float red[32];
  long long row = blockIdx.x;
  long long mod = (row / seq) * dim;  // the row's sample's scale and shift
  float v[VPT][4];
  load_row<VPT, VEC>(x + row * dim, dim, v);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) s += v[k][j];
  float mean = block_sum(s, red) / (float)dim;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float d = slot_col<VEC>(k, j) < dim ? v[k][j] - mean : 0.0f;
      q += d * d;
    }
  float rstd = rsqrtf(block_sum(q, red) / (float)dim + eps);
  float* o = out + row * dim;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < dim) {
        float y = (v[k][j] - mean) * rstd * (1.0f + scale[mod + c]) + shift[mod + c];
        o[c] = y / (1.0f + expf(-y));
      }
    }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Threads for a row of n floats held as VPT slots of 4 floats a thread: a multiple of 32, at most 1024.
static int row_threads(int n, int vpt) { return std::min(1024, std::max(32, ((n + 4 * vpt - 1) / (4 * vpt) + 31) / 32 * 32)); }

// Smallest VPT in {1, 2, 4, 8} with at most 512 threads a row (rows up to 32768 floats).
static int row_vpt(int n) {
  TORCH_CHECK(n <= 32768, "rows longer than 32768 floats are not supported");
  for (int v = 1; v < 8; v *= 2) if (row_threads(n, v) <= 512) return v;
  return 8;
}

template <int VPT>
static void launch(bool vec, int rows, int threads, cudaStream_t st, const float* x, const float* sc,
                   const float* sh, float* o, int seq, int dim, float eps) {
  if (vec) ln_modulate_silu_kernel<VPT, true><<<rows, threads, 0, st>>>(x, sc, sh, o, seq, dim, eps);
  else ln_modulate_silu_kernel<VPT, false><<<rows, threads, 0, st>>>(x, sc, sh, o, seq, dim, eps);
}

torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor shift, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  TORCH_CHECK(scale.is_contiguous() && shift.is_contiguous(), "expected contiguous scale and shift");
  auto out = torch::empty_like(x);
  int seq = (int)x.size(1), dim = (int)x.size(2);
  int rows = (int)(x.numel() / dim);
  if (rows == 0) return out;
  int vpt = row_vpt(dim), threads = row_threads(dim, vpt);
  const float *xp = x.data_ptr<float>(), *sc = scale.data_ptr<float>(), *sh = shift.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = dim % 4 == 0 && aligned16(xp) && aligned16(op);
  auto st = at::cuda::getCurrentCUDAStream();
  if (vpt == 1) launch<1>(vec, rows, threads, st, xp, sc, sh, op, seq, dim, (float)eps);
  else if (vpt == 2) launch<2>(vec, rows, threads, st, xp, sc, sh, op, seq, dim, (float)eps);
  else if (vpt == 4) launch<4>(vec, rows, threads, st, xp, sc, sh, op, seq, dim, (float)eps);
  else launch<8>(vec, rows, threads, st, xp, sc, sh, op, seq, dim, (float)eps);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_109_layernorm_modulate_silu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor scale, torch::Tensor shift, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim, elementwise_affine=False)

    def forward(self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), scale.contiguous(), shift.contiguous(), self.norm.eps)
