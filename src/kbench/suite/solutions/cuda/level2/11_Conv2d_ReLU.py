"""Conv2d + ReLU: cuDNN convolution without its bias, then one vectorised kernel adds the per-channel bias and
applies ReLU in place (eager: conv + bias add + relu)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float act(float v, float b) {
  return fmaxf(v + b, 0.0f);
}

// In place over an (N, C, *spatial) tensor; V = 4 when the spatial size is a multiple of 4, so a float4
// never straddles two channels.
template <int V>
__global__ void bias_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total, int spatial, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / spatial) % channels);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = act(v.x, bias[c]); v.y = act(v.y, bias[c]); v.z = act(v.z, bias[c]); v.w = act(v.w, bias[c]);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = act(y[i], bias[c]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

void epilogue(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int channels = (int)y.size(1);
  int spatial = (int)(total / (y.size(0) * channels));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (spatial % 4 == 0) {
    bias_relu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  } else {
    bias_relu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, spatial, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_11_conv2d_relu_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.epilogue(y, self.conv.bias)
        return y
