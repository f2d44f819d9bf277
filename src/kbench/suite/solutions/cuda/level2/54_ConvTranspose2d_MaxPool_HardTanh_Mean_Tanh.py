"""ConvTranspose2d + MaxPool2d + hardtanh + spatial mean + tanh: cuDNN transposed convolution without its
bias, then one kernel: a block per (sample, channel) plane; each thread takes 2x2 window maxima, adds the bias
after the max (a per-channel constant commutes with it), clamps to [-1, 1] and accumulates; a shared memory
tree sums the block (fixed order) and one thread writes tanh(mean). At the full size the 537 MB conv output is
read once and nothing else is written; eager adds the bias (a read and a write), then max_pool2d (a read and a
134 MB write), hardtanh (read + write), mean and tanh.

The transposed convolution (69 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 3.0e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256

// Sum over the block (blockDim.x == THREADS, a power of two), fixed order; every thread gets the result.
__device__ float block_sum(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  float r = smem[0];
  __syncthreads();
  return r;
}

__global__ void maxpool_hardtanh_mean_tanh_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                                  float* __restrict__ out, int channels, int h, int w, int oh, int ow) {
  __shared__ float smem[THREADS];
  long long plane = blockIdx.x;
  const float* base = y + plane * h * w;
  float b = bias[plane % channels];
  float acc = 0.0f;
  for (int o = threadIdx.x; o < oh * ow; o += THREADS) {
    const float* src = base + (long long)(o / ow) * 2 * w + (o % ow) * 2;
    float m = fmaxf(fmaxf(src[0], src[1]), fmaxf(src[w], src[w + 1]));
    acc += fminf(fmaxf(m + b, -1.0f), 1.0f);
  }
  float total = block_sum(acc, smem);
  if (threadIdx.x == 0) out[plane] = tanhf(total / (float)(oh * ow));
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor pool_mean_tanh(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::empty({n, c, 1, 1}, y.options());
  maxpool_hardtanh_mean_tanh_kernel<<<(unsigned)(n * c), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), (int)c, h, w, h / 2, w / 2);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_54_convtranspose2d_maxpool_hardtanh_mean_tanh_cuda",
    cpp_sources="torch::Tensor pool_mean_tanh(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["pool_mean_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        return _ext.pool_mean_tanh(y, ct.bias)
