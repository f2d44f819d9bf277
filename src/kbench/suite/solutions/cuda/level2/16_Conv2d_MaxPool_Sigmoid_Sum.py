"""Conv2d + max pool + sigmoid + sum: cuDNN convolution without its bias, then one kernel (a block per
(sample, channel) plane) takes each pooling window's max, adds the bias (max(v) + b == max(v + b)),
applies sigmoid and sums; per-plane sums are added into the per-sample total with one atomic per block
(eager: conv + bias + max_pool2d + sigmoid + sum)."""

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

__global__ void maxpool_sigmoid_sum_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                           float* __restrict__ out, int channels, int h, int w, int k) {
  __shared__ float smem[32];
  int ph = h / k, pw = w / k;
  const float* plane = y + (long long)blockIdx.x * h * w;
  float b = bias[blockIdx.x % channels];
  float acc = 0.0f;
  for (int p = threadIdx.x; p < ph * pw; p += blockDim.x) {
    int r0 = (p / pw) * k, c0 = (p % pw) * k;
    float m = -INFINITY;
    for (int dr = 0; dr < k; ++dr)
      for (int dc = 0; dc < k; ++dc) m = fmaxf(m, plane[(r0 + dr) * w + c0 + dc]);
    acc += 1.0f / (1.0f + expf(-(m + b)));
  }
  acc = block_sum(acc, smem);
  if (threadIdx.x == 0) atomicAdd(out + blockIdx.x / channels, acc);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor maxpool_sigmoid_sum(torch::Tensor y, torch::Tensor bias, int64_t k) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)y.size(0), c = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::zeros({n}, y.options());
  maxpool_sigmoid_sum_kernel<<<n * c, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), c, h, w, (int)k);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_16_conv2d_maxpool_sigmoid_sum_cuda",
    cpp_sources="torch::Tensor maxpool_sigmoid_sum(torch::Tensor y, torch::Tensor bias, int64_t k);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["maxpool_sigmoid_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.maxpool_sigmoid_sum(y, self.conv.bias, int(self.pool_size))
