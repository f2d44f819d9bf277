"""Row variance written as mean, subtract, square, mean: one kernel, a block per row, one read with
Welford statistics merged across the block (eager: mean + sub + pow + mean, four passes)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
struct Stats { float n, mean, m2; };

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
  float n = a.n + b.n;
  if (n == 0.0f) return a;
  float d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

__device__ __forceinline__ void push(Stats& s, float v) {
  s.n += 1.0f;
  float d = v - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (v - s.mean);
}

// Welford statistics of the whole block; every thread gets the merged result. smem holds 32 entries.
__device__ Stats block_welford(Stats s, Stats* smem) {
  for (int o = 16; o > 0; o >>= 1) {
    Stats t{__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
            __shfl_xor_sync(0xffffffffu, s.m2, o)};
    s = merge(s, t);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = s;
  __syncthreads();
  Stats t{0.0f, 0.0f, 0.0f};
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = merge(t, smem[w]);
  return t;
}

__global__ void row_variance_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
  __shared__ Stats smem[32];
  const float* row = x + (long long)blockIdx.x * cols;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int c = threadIdx.x; c < cols; c += blockDim.x) push(s, row[c]);
  s = block_welford(s, smem);
  if (threadIdx.x == 0) out[blockIdx.x] = s.m2 / s.n;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor row_variance(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int cols = (int)x.size(-1);
  int rows = (int)(x.numel() / cols);
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  row_variance_kernel<<<rows, 512, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), cols);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_28_row_variance_cuda",
    cpp_sources="torch::Tensor row_variance(torch::Tensor x);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["row_variance"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_variance(x.contiguous())
