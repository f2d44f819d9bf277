"""Batched matmul + scale + bias + ReLU: cuBLAS batched GEMM, then one vectorised kernel applies scale,
bias and ReLU in place (eager: bmm + mul + add + relu, three passes over the output)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// V = 4 when the row length is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void scale_bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total,
                                       int n, float scale) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % n);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      float4 b = *reinterpret_cast<const float4*>(bias + c);
      v.x = fmaxf(v.x * scale + b.x, 0.0f); v.y = fmaxf(v.y * scale + b.y, 0.0f);
      v.z = fmaxf(v.z * scale + b.z, 0.0f); v.w = fmaxf(v.w * scale + b.w, 0.0f);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = fmaxf(y[i] * scale + bias[c], 0.0f);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

torch::Tensor forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale) {
  TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::bmm(a, b);
  long long total = y.numel();
  int n = (int)y.size(-1);
  auto stream = at::cuda::getCurrentCUDAStream();
  if (n % 4 == 0) {
    scale_bias_relu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n, (float)scale);
  } else {
    scale_bias_relu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n, (float)scale);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_35_bmm_scale_bias_relu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, n: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.forward(a, b, self.bias, float(self.scale))
