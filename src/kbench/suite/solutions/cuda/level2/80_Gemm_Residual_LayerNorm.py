"""Square linear + residual + LayerNorm: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate tensor-core
GEMM is what the Triton solution adds), and one kernel does the whole chain after it: a block per row holds
the row in registers (float4 loads when the width is a multiple of 4), adds the bias and the residual x,
takes the mean and the centered variance with warp-shuffle block reductions and writes the affine result
in place (eager: addmm, add, layer_norm: three passes over the output after the GEMM).

Full preset: 4096 x 4096 x 4096: the 64 MB GEMM output and the residual are read once, the output written
once. Compile-checked for sm_90 (no GPU here to run it).
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

// A block per row of the GEMM output y (bias not yet added); x: the residual, same layout. In place.
template <int VPT, bool VEC>
__global__ void bias_residual_layernorm_kernel(float* __restrict__ y, const float* __restrict__ x,
                                               const float* __restrict__ bias, const float* __restrict__ gamma,
                                               const float* __restrict__ beta, int n, float eps) {
  __shared__ float red[32];
  long long off = (long long)blockIdx.x * n;
  float* row = y + off;
  float v[VPT][4], r[VPT][4];
  load_row<VPT, VEC>(row, n, v);
  load_row<VPT, VEC>(x + off, n, r);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      v[k][j] = c < n ? v[k][j] + bias[c] + r[k][j] : 0.0f;
      s += v[k][j];
    }
  float mean = block_sum(s, red) / (float)n;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float d = slot_col<VEC>(k, j) < n ? v[k][j] - mean : 0.0f;
      q += d * d;
    }
  float rstd = rsqrtf(block_sum(q, red) / (float)n + eps);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < n) row[c] = (v[k][j] - mean) * rstd * gamma[c] + beta[c];
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
static void launch(bool vec, int rows, int threads, cudaStream_t st, float* y, const float* x, const float* b,
                   const float* g, const float* be, int n, float eps) {
  if (vec) bias_residual_layernorm_kernel<VPT, true><<<rows, threads, 0, st>>>(y, x, b, g, be, n, eps);
  else bias_residual_layernorm_kernel<VPT, false><<<rows, threads, 0, st>>>(y, x, b, g, be, n, eps);
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma,
                      torch::Tensor beta, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  if (m == 0 || n == 0) return y;
  int vpt = row_vpt(n), threads = row_threads(n, vpt);
  float* yp = y.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  const float *bp = bias.data_ptr<float>(), *gp = gamma.data_ptr<float>(), *bep = beta.data_ptr<float>();
  bool vec = n % 4 == 0 && aligned16(yp) && aligned16(xp);
  auto st = at::cuda::getCurrentCUDAStream();
  if (vpt == 1) launch<1>(vec, m, threads, st, yp, xp, bp, gp, bep, n, (float)eps);
  else if (vpt == 2) launch<2>(vec, m, threads, st, yp, xp, bp, gp, bep, n, (float)eps);
  else if (vpt == 4) launch<4>(vec, m, threads, st, yp, xp, bp, gp, bep, n, (float)eps);
  else launch<8>(vec, m, threads, st, yp, xp, bp, gp, bep, n, (float)eps);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_80_gemm_residual_layernorm_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma, torch::Tensor beta, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.layer_norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, ln.weight, ln.bias, ln.eps)
