"""Linear + subtract the row max + GELU: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate
tensor-core GEMM is what the Triton solution adds), and one kernel does the rest: a block per row holds the
row in registers (float4 loads when the width is a multiple of 4), adds the bias, takes the max with warp
shuffles and writes gelu(y - max) (exact erf GELU) in place (eager: addmm, amax, sub, gelu).

Full preset: 4096 x 4096 x 4096: the 64 MB GEMM output is read once and written once after cuBLAS.
Compile-checked for sm_90 (no GPU here to run it).
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

// Max over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it. red: 32 floats.
__device__ __forceinline__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // an earlier call may still be reading red
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = fmaxf(t, red[w]);
  return t;
}

// A block per row of the GEMM output y (bias not yet added), held in registers; written in place.
template <int VPT, bool VEC>
__global__ void bias_rowmax_sub_gelu_kernel(float* __restrict__ y, const float* __restrict__ bias, int n) {
  __shared__ float red[32];
  float* row = y + (long long)blockIdx.x * n;
  float v[VPT][4];
  load_row<VPT, VEC>(row, n, v);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      v[k][j] = c < n ? v[k][j] + bias[c] : -INFINITY;
    }
  float mx = -INFINITY;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) mx = fmaxf(mx, v[k][j]);
  mx = block_max(mx, red);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < n) {
        float h = v[k][j];
        row[c] = 0.5f * (h - mx) * (1.0f + erff((h - mx) * 0.7071067811865476f));
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
static void launch(bool vec, int rows, int threads, cudaStream_t st, float* y, const float* b, int n) {
  if (vec) bias_rowmax_sub_gelu_kernel<VPT, true><<<rows, threads, 0, st>>>(y, b, n);
  else bias_rowmax_sub_gelu_kernel<VPT, false><<<rows, threads, 0, st>>>(y, b, n);
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  if (m == 0 || n == 0) return y;
  int vpt = row_vpt(n), threads = row_threads(n, vpt);
  float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  bool vec = n % 4 == 0 && aligned16(yp);
  auto st = at::cuda::getCurrentCUDAStream();
  if (vpt == 1) launch<1>(vec, m, threads, st, yp, bp, n);
  else if (vpt == 2) launch<2>(vec, m, threads, st, yp, bp, n);
  else if (vpt == 4) launch<4>(vec, m, threads, st, yp, bp, n);
  else launch<8>(vec, m, threads, st, yp, bp, n);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_92_gemm_rowmax_subtract_gelu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias)
