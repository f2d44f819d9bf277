"""AvgPool2d + sigmoid + spatial sum: one kernel, a block per (sample, channel) plane, pools each window in
registers, applies sigmoid and reduces the plane; the pooled map is never written (eager: avg_pool2d +
sigmoid + sum)."""

import torch
import torch.nn as nn
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

__global__ void avgpool_sigmoid_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int h, int w, int k) {
  __shared__ float smem[32];
  int ph = h / k, pw = w / k;
  const float* plane = x + (long long)blockIdx.x * h * w;
  float inv = 1.0f / (float)(k * k);
  float acc = 0.0f;
  for (int p = threadIdx.x; p < ph * pw; p += blockDim.x) {
    int r0 = (p / pw) * k, c0 = (p % pw) * k;
    float s = 0.0f;
    for (int dr = 0; dr < k; ++dr)
      for (int dc = 0; dc < k; ++dc) s += plane[(r0 + dr) * w + c0 + dc];
    acc += 1.0f / (1.0f + expf(-s * inv));
  }
  acc = block_sum(acc, smem);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor avgpool_sigmoid_sum(torch::Tensor x, int64_t k) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)x.size(0), c = (int)x.size(1), h = (int)x.size(2), w = (int)x.size(3);
  auto out = torch::empty({n, c}, x.options());
  avgpool_sigmoid_sum_kernel<<<n * c, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), h, w, (int)k);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_33_avgpool_sigmoid_sum_cuda",
    cpp_sources="torch::Tensor avgpool_sigmoid_sum(torch::Tensor x, int64_t k);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["avgpool_sigmoid_sum"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int):
        super().__init__()
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.avgpool_sigmoid_sum(x.contiguous(), int(self.kernel_size))
