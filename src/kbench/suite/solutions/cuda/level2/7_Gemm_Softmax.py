"""Linear + softmax: cuBLAS GEMM without its bias, then one kernel (a block per row) adds the bias and runs
an online softmax in place: one pass for the running max and rescaled sum, one pass to write
(eager: addmm + softmax)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ float block_sum(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += smem[w];
  return t;
}

__device__ float block_max(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = fmaxf(t, smem[w]);
  return t;
}

__global__ void bias_softmax_kernel(float* __restrict__ y, const float* __restrict__ bias, int n) {
  __shared__ float smem[32];
  float* row = y + (long long)blockIdx.x * n;
  float m = -INFINITY, s = 0.0f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float v = row[c] + bias[c];
    if (v > m) { s = s * expf(m - v) + 1.0f; m = v; } else { s += expf(v - m); }
  }
  float mb = block_max(m, smem);
  float inv = 1.0f / block_sum(s > 0.0f ? s * expf(m - mb) : 0.0f, smem);
  for (int c = threadIdx.x; c < n; c += blockDim.x) row[c] = expf(row[c] + bias[c] - mb) * inv;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  bias_softmax_kernel<<<m, 256, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), bias.data_ptr<float>(), n);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_7_gemm_softmax_cuda",
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
