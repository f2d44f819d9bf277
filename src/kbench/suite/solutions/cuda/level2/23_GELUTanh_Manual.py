"""The seed's hand-written tanh GELU (eight separate torch ops, eight passes over memory) as one vectorised
grid-stride kernel: one read and one write per element."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float gelu(float v) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
  return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ out, long long total) {
  long long stride = (long long)gridDim.x * blockDim.x;
  long long n4 = total / 4;
  const float4* x4 = reinterpret_cast<const float4*>(x);
  float4* o4 = reinterpret_cast<float4*>(out);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
    float4 v = x4[i];
    v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
    o4[i] = v;
  }
  for (long long i = n4 * 4 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) out[i] = gelu(x[i]);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor gelu_tanh(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  TORCH_CHECK(reinterpret_cast<uintptr_t>(x.data_ptr<float>()) % 16 == 0, "input must be 16-byte aligned");
  auto out = torch::empty_like(x);
  long long total = x.numel();
  int grid = (int)std::max(1LL, std::min((total / 4 + 255) / 256, 8192LL));
  gelu_tanh_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), total);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_23_gelu_tanh_cuda",
    cpp_sources="torch::Tensor gelu_tanh(torch::Tensor x);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["gelu_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x.contiguous())
