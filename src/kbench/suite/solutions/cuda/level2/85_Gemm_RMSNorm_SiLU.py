"""Linear + RMSNorm + SiLU: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate tensor-core GEMM is
what the Triton solution adds), and one kernel does the whole chain after it: a block per row holds the row
in registers (float4 loads when the width is a multiple of 4), adds the bias, reduces the sum of squares
with warp shuffles and writes silu(y * rsqrt(mean(y^2) + eps) * weight) in place (eager: addmm, pow, mean,
add, rsqrt, mul, mul, silu).

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

// A block per row of the GEMM output y (bias not yet added), held in registers; written in place.
template <int VPT, bool VEC>
__global__ void bias_rmsnorm_silu_kernel(float* __restrict__ y, const float* __restrict__ bias, const float* __restrict__ w, float eps, int n) {
  __shared__ float red[32];
  float* row = y + (long long)blockIdx.x * n;
  float v[VPT][4];
  load_row<VPT, VEC>(row, n, v);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      v[k][j] = c < n ? v[k][j] + bias[c] : 0.0f;
    }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) s += v[k][j] * v[k][j];
  s = block_sum(s, red);
  float r = rsqrtf(s / (float)n + eps);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < n) {
        float h = v[k][j];
        row[c] = (h * r * w[c]) / (1.0f + expf(-(h * r * w[c])));
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
static void launch(bool vec, int rows, int threads, cudaStream_t st, float* y, const float* b, const float* w, float eps, int n) {
  if (vec) bias_rmsnorm_silu_kernel<VPT, true><<<rows, threads, 0, st>>>(y, b, w, eps, n);
  else bias_rmsnorm_silu_kernel<VPT, false><<<rows, threads, 0, st>>>(y, b, w, eps, n);
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  if (m == 0 || n == 0) return y;
  int vpt = row_vpt(n), threads = row_threads(n, vpt);
  float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  bool vec = n % 4 == 0 && aligned16(yp);
  auto st = at::cuda::getCurrentCUDAStream();
  if (vpt == 1) launch<1>(vec, m, threads, st, yp, bp, w.data_ptr<float>(), (float)eps, n);
  else if (vpt == 2) launch<2>(vec, m, threads, st, yp, bp, w.data_ptr<float>(), (float)eps, n);
  else if (vpt == 4) launch<4>(vec, m, threads, st, yp, bp, w.data_ptr<float>(), (float)eps, n);
  else launch<8>(vec, m, threads, st, yp, bp, w.data_ptr<float>(), (float)eps, n);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_85_gemm_rmsnorm_silu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor w, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, self.weight, self.eps)
