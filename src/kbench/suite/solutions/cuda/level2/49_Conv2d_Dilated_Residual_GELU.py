"""Dilated Conv2d + residual + GELU: cuDNN convolution without its bias, then one vectorised kernel (float4
when the plane size allows) computes gelu(y + b_c + x) in place (eager: conv + bias, add, gelu -> up to 7
passes over 268 MB tensors at the full size; here two reads and one write). GELU is the exact erf form
(F.gelu's default).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 9.5e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

// In place over an (N, C, *spatial) tensor; V = 4 when the spatial size is a multiple of 4, so a float4
// never straddles two channels. 64-bit indices: the tensor can exceed 2^31 elements.
template <int V>
__global__ void bias_residual_gelu_kernel(float* __restrict__ y, const float* __restrict__ x, const float* __restrict__ bias, long long total, int spatial, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / spatial) % channels);
    float b = bias[c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      float4 r = *reinterpret_cast<const float4*>(x + i);
      v.x = gelu(v.x + r.x + b); v.y = gelu(v.y + r.y + b); v.z = gelu(v.z + r.z + b); v.w = gelu(v.w + r.w + b);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = gelu(y[i] + x[i] + b);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void epilogue(torch::Tensor y, torch::Tensor x, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int channels = (int)y.size(1);
  int spatial = (int)(total / (y.size(0) * channels));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (spatial % 4 == 0) {
    bias_residual_gelu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), x.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  } else {
    bias_residual_gelu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), x.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_49_conv2d_dilated_residual_gelu_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor x, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels: int, dilation: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        cv = self.conv
        y = F.conv2d(x, cv.weight, None, cv.stride, cv.padding, cv.dilation).contiguous()
        _ext.epilogue(y, x, cv.bias)
        return y
