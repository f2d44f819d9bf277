"""Conv2d + per-channel multiplier + LeakyReLU + GELU: cuDNN convolution without its bias, then one vectorised
kernel (float4 when the plane size allows) computes gelu(leaky_relu((y + b_c) * m_c, 0.1)) in place (eager:
conv + bias, mul, leaky_relu, gelu -> up to 8 passes over the 537 MB conv output at the full size; here one
read and one write). GELU is the exact erf form (F.gelu's default).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 7.2e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float act(float v, float b, float m) {
  v = (v + b) * m;
  v = v >= 0.0f ? v : 0.1f * v;
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
}

// In place over an (N, C, *spatial) tensor; V = 4 when the spatial size is a multiple of 4, so a float4
// never straddles two channels. 64-bit indices: the tensor can exceed 2^31 elements.
template <int V>
__global__ void bias_mul_leaky_gelu_kernel(float* __restrict__ y, const float* __restrict__ bias, const float* __restrict__ mult, long long total, int spatial, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / spatial) % channels);
    float b = bias[c], m = mult[c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = act(v.x, b, m); v.y = act(v.y, b, m); v.z = act(v.z, b, m); v.w = act(v.w, b, m);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = act(y[i], b, m);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void epilogue(torch::Tensor y, torch::Tensor bias, torch::Tensor mult) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int channels = (int)y.size(1);
  int spatial = (int)(total / (y.size(0) * channels));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (spatial % 4 == 0) {
    bias_mul_leaky_gelu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), mult.data_ptr<float>(), total, spatial, channels);
  } else {
    bias_mul_leaky_gelu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), mult.data_ptr<float>(), total, spatial, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_43_conv2d_multiply_leakyrelu_gelu_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor bias, torch::Tensor mult);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, multiplier_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.multiplier = nn.Parameter(1.0 + torch.randn(multiplier_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.epilogue(y, self.conv.bias, self.multiplier.reshape(-1).contiguous())
        return y
