"""Conv2d + InstanceNorm + tanh: cuDNN convolution, then one kernel (a block per (sample, channel) plane)
computes the plane statistics with Welford, normalizes and applies tanh in place. The conv bias is
dropped: a per-plane constant cancels in instance normalization (no affine, as nn.InstanceNorm2d's
default), saving its add (eager: conv + bias + instance_norm's stats/normalize + tanh)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
struct Stats { float n, mean, m2; };

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
  float n = a.n + b.n;
  if (n == 0.0f) return a;
  float d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

__device__ __forceinline__ void push(Stats& s, float v) {
  s.n += 1.0f;
  float d = v - s.mean;
  s.mean += d / s.n;
  s.m2 += d * (v - s.mean);
}

// Welford statistics of the whole block; every thread gets the merged result. smem holds 32 entries.
__device__ Stats block_welford(Stats s, Stats* smem) {
  for (int o = 16; o > 0; o >>= 1) {
    Stats t{__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
            __shfl_xor_sync(0xffffffffu, s.m2, o)};
    s = merge(s, t);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = s;
  __syncthreads();
  Stats t{0.0f, 0.0f, 0.0f};
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = merge(t, smem[w]);
  return t;
}

__global__ void instancenorm_tanh_kernel(float* __restrict__ y, int hw, float eps) {
  __shared__ Stats smem[32];
  float* plane = y + (long long)blockIdx.x * hw;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int i = threadIdx.x; i < hw; i += blockDim.x) push(s, plane[i]);
  s = block_welford(s, smem);
  float rstd = rsqrtf(s.m2 / s.n + eps);
  for (int i = threadIdx.x; i < hw; i += blockDim.x) plane[i] = tanhf((plane[i] - s.mean) * rstd);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void instancenorm_tanh(torch::Tensor y, double eps) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int planes = (int)(y.size(0) * y.size(1)), hw = (int)(y.size(2) * y.size(3));
  instancenorm_tanh_kernel<<<planes, 512, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), hw, (float)eps);
}
"""

_ext = load_inline(
    name="kbench_l2_15_conv2d_instancenorm_tanh_cuda",
    cpp_sources="void instancenorm_tanh(torch::Tensor y, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["instancenorm_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.instance_norm = nn.InstanceNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.instancenorm_tanh(y, self.instance_norm.eps)
        return y
