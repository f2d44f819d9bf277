"""Conv2d + GELU + global average pool: cuDNN convolution without its bias, then one kernel (a block per
(sample, channel) plane) adds the bias, applies erf GELU and averages the plane; the activation map is
never written back (eager: conv + bias + gelu + adaptive_avg_pool2d)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32); every thread gets the total. smem holds 32 floats.
__device__ float block_sum(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += smem[w];
  return t;
}

__global__ void bias_gelu_avgpool_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                         float* __restrict__ out, int hw, int channels) {
  __shared__ float smem[32];
  const float* plane = y + (long long)blockIdx.x * hw;
  float b = bias[blockIdx.x % channels];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < hw; i += blockDim.x) {
    float v = plane[i] + b;
    acc += 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  }
  acc = block_sum(acc, smem);
  if (threadIdx.x == 0) out[blockIdx.x] = acc / (float)hw;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor gelu_avgpool(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)y.size(0), c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  auto out = torch::empty({n, c}, y.options());
  bias_gelu_avgpool_kernel<<<n * c, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), hw, c);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_14_conv2d_gelu_avgpool_cuda",
    cpp_sources="torch::Tensor gelu_avgpool(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["gelu_avgpool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.gelu_avgpool(y, self.conv.bias)
