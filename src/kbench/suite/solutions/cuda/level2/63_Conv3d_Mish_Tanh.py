"""Conv3d + Mish + tanh: cuDNN convolution without its bias, then one vectorised kernel (float4 when the
volume allows) adds the per-channel bias and applies tanh(mish(.)) in place (eager: conv + bias, mish, tanh ->
up to 6 passes over the 268 MB conv output at the full size; here one read and one write).

Mish is x * tanh(softplus(x)) = x * n / (n + 2) with n = e^x (e^x + 2): one exp and one division (x capped at
20 inside the exp, where n / (n + 2) is already 1.0 in fp32).

The convolution (58 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 3.6e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float mish(float x) {
  float e = expf(fminf(x, 20.0f));
  float n = e * (e + 2.0f);
  return x * (n / (n + 2.0f));
}

// In place over an (N, C, *spatial) tensor; V = 4 when the spatial size is a multiple of 4, so a float4
// never straddles two channels. 64-bit indices: the tensor can exceed 2^31 elements.
template <int V>
__global__ void bias_mish_tanh_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total, int spatial, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / spatial) % channels);
    float b = bias[c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = tanhf(mish(v.x + b)); v.y = tanhf(mish(v.y + b)); v.z = tanhf(mish(v.z + b)); v.w = tanhf(mish(v.w + b));
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = tanhf(mish(y[i] + b));
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void epilogue(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int channels = (int)y.size(1);
  int spatial = (int)(total / (y.size(0) * channels));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (spatial % 4 == 0) {
    bias_mish_tanh_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  } else {
    bias_mish_tanh_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_63_conv3d_mish_tanh_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.epilogue(y, self.conv.bias)
        return y
