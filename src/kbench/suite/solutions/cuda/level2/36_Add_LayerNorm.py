"""Residual add + LayerNorm: one kernel, a block per row, computes x + residual on the fly for Welford
statistics and again for the normalized output, so the sum is never written (eager: add + layer_norm)."""

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

__global__ void add_layernorm_kernel(const float* __restrict__ x, const float* __restrict__ r,
                                     const float* __restrict__ gamma, const float* __restrict__ beta,
                                     float* __restrict__ out, int dim, float eps) {
  __shared__ Stats smem[32];
  long long off = (long long)blockIdx.x * dim;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int c = threadIdx.x; c < dim; c += blockDim.x) push(s, x[off + c] + r[off + c]);
  s = block_welford(s, smem);
  float rstd = rsqrtf(s.m2 / s.n + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x)
    out[off + c] = (x[off + c] + r[off + c] - s.mean) * rstd * gamma[c] + beta[c];
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor add_layernorm(torch::Tensor x, torch::Tensor r, torch::Tensor gamma, torch::Tensor beta, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && r.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32 CUDA tensors");
  auto out = torch::empty_like(x);
  int dim = (int)x.size(-1);
  int rows = (int)(x.numel() / dim);
  add_layernorm_kernel<<<rows, 512, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), r.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), out.data_ptr<float>(), dim, (float)eps);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_36_add_layernorm_cuda",
    cpp_sources="torch::Tensor add_layernorm(torch::Tensor x, torch::Tensor r, torch::Tensor gamma, torch::Tensor beta, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["add_layernorm"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return _ext.add_layernorm(x.contiguous(), residual.contiguous(), ln.weight, ln.bias, ln.eps)
