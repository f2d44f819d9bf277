"""Linear + Mish + clamp(-1, 1): cuBLAS GEMM without its bias, then one vectorised kernel adds the bias and
applies Mish and the clamp in place (eager: addmm + mish + clamp, three passes over the output)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float act(float v) {
  // softplus with torch's threshold of 20 (above it softplus(v) == v in fp32)
  float sp = v > 20.0f ? v : log1pf(expf(v));
  return fminf(fmaxf(v * tanhf(sp), -1.0f), 1.0f);
}

// V = 4 when the row length is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void bias_mish_clamp_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % n);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      float4 b = *reinterpret_cast<const float4*>(bias + c);
      v.x = act(v.x + b.x); v.y = act(v.y + b.y); v.z = act(v.z + b.z); v.w = act(v.w + b.w);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = act(y[i] + bias[c]);
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
  if (n % 4 == 0) {
    bias_mish_clamp_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n);
  } else {
    bias_mish_clamp_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_4_gemm_mish_clamp_cuda",
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
