"""Linear + LayerNorm + GELU: cuBLAS GEMM without its bias, then one kernel (a block per row) adds the bias,
computes the row statistics with Welford (merged across the block with Chan's formula), normalizes,
applies the affine transform and erf GELU in place (eager: addmm + layer_norm + gelu)."""

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

__global__ void bias_layernorm_gelu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                           const float* __restrict__ gamma, const float* __restrict__ beta,
                                           int n, float eps) {
  __shared__ Stats smem[32];
  float* row = y + (long long)blockIdx.x * n;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float v = row[c] + bias[c];
    s.n += 1.0f;
    float d = v - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (v - s.mean);
  }
  s = block_welford(s, smem);
  float rstd = rsqrtf(s.m2 / s.n + eps);
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float v = (row[c] + bias[c] - s.mean) * rstd * gamma[c] + beta[c];
    row[c] = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma,
                      torch::Tensor beta, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  bias_layernorm_gelu_kernel<<<m, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), n, (float)eps);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_8_gemm_layernorm_gelu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma, "
    "torch::Tensor beta, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.layer_norm = nn.LayerNorm(out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(
            x.contiguous(), self.linear.weight, self.linear.bias, self.layer_norm.weight, self.layer_norm.bias, self.layer_norm.eps
        )
