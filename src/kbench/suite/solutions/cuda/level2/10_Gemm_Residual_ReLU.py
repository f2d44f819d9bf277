"""Square linear + residual + ReLU: cuBLAS GEMM without its bias, then one vectorised kernel adds the bias
and the residual input and applies ReLU in place (eager: addmm + add + relu)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// V = 4 when the row length is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void bias_residual_relu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                          const float* __restrict__ x, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % n);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      float4 b = *reinterpret_cast<const float4*>(bias + c);
      float4 r = *reinterpret_cast<const float4*>(x + i);
      v.x = fmaxf(v.x + b.x + r.x, 0.0f); v.y = fmaxf(v.y + b.y + r.y, 0.0f);
      v.z = fmaxf(v.z + b.z + r.z, 0.0f); v.w = fmaxf(v.w + b.w + r.w, 0.0f);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = fmaxf(y[i] + bias[c] + x[i], 0.0f);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  long long total = y.numel();
  int n = (int)y.size(1);
  auto stream = at::cuda::getCurrentCUDAStream();
  float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  const float* xp = x.data_ptr<float>();
  bool aligned = n % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
  if (aligned) {
    bias_residual_relu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(yp, bp, xp, total, n);
  } else {
    bias_residual_relu_kernel<1><<<grid_for(total), 256, 0, stream>>>(yp, bp, xp, total, n);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_10_gemm_residual_relu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias)
