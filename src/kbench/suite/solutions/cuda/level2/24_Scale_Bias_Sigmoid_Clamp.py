"""Per-feature scale and bias, sigmoid, clamp to [0.1, 0.9]: one vectorised grid-stride kernel instead of
four passes (eager: mul + add + sigmoid + clamp)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float f(float v, float a, float b) {
  return fminf(fmaxf(1.0f / (1.0f + expf(-(v * a + b))), 0.1f), 0.9f);
}

// V = 4 when the row length is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void scale_bias_sigmoid_clamp_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                                const float* __restrict__ bias, float* __restrict__ out,
                                                long long total, int dim) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % dim);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<const float4*>(x + i);
      float4 a = *reinterpret_cast<const float4*>(scale + c);
      float4 b = *reinterpret_cast<const float4*>(bias + c);
      v.x = f(v.x, a.x, b.x); v.y = f(v.y, a.y, b.y); v.z = f(v.z, a.z, b.z); v.w = f(v.w, a.w, b.w);
      *reinterpret_cast<float4*>(out + i) = v;
    } else {
      out[i] = f(x[i], scale[c], bias[c]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor scale_bias_sigmoid_clamp(torch::Tensor x, torch::Tensor scale, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  auto out = torch::empty_like(x);
  long long total = x.numel();
  int dim = (int)x.size(-1);
  const float* xp = x.data_ptr<float>();
  bool aligned = dim % 4 == 0 && reinterpret_cast<uintptr_t>(xp) % 16 == 0;
  auto stream = at::cuda::getCurrentCUDAStream();
  if (aligned) {
    scale_bias_sigmoid_clamp_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(xp, scale.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, dim);
  } else {
    scale_bias_sigmoid_clamp_kernel<1><<<grid_for(total), 256, 0, stream>>>(xp, scale.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, dim);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_24_scale_bias_sigmoid_clamp_cuda",
    cpp_sources="torch::Tensor scale_bias_sigmoid_clamp(torch::Tensor x, torch::Tensor scale, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["scale_bias_sigmoid_clamp"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_bias_sigmoid_clamp(x.contiguous(), self.scale, self.bias)
