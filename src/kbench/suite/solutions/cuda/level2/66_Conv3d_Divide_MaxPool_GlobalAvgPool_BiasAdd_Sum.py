"""Conv3d + divide + MaxPool3d + global average pool + bias + sum over channels: cuDNN convolution without its
bias, then two kernels:
1. a block per (sample, channel) plane: each thread takes 2x2x2 window maxima of (y + b_c) / divisor (per
   element, so any sign of the divisor is right) and accumulates; a shared-memory tree sums the block;
2. a thread per sample adds the channels' means and biases in a fixed order.
The 220 MB conv output (full size) is read once (the windows skip trailing voxels) and nothing of its size is
written; eager adds the conv bias (read + write), divides (read + write), pools (read, 27 MB write), then runs
the average, add and sum.

The convolution (48 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 4.8e-7."""

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

__global__ void div_maxpool_sum_kernel(const float* __restrict__ y, const float* __restrict__ conv_bias,
                                       float* __restrict__ sums, int channels, int d, int h, int w,
                                       int od, int oh, int ow, float inv_div) {
  __shared__ float smem[THREADS];
  long long plane = blockIdx.x;
  const float* base = y + plane * d * h * w;
  float b = conv_bias[plane % channels];
  long long hw = (long long)h * w;
  int npool = od * oh * ow;
  float acc = 0.0f;
  for (int o = threadIdx.x; o < npool; o += THREADS) {
    const float* src = base + (long long)(o / (oh * ow)) * 2 * hw + (long long)((o / ow) % oh) * 2 * w + (o % ow) * 2;
    float best = -INFINITY;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 2; ++k) best = fmaxf(best, (src[i * hw + j * w + k] + b) * inv_div);
    acc += best;
  }
  float total = block_sum(acc, smem);
  if (threadIdx.x == 0) sums[plane] = total;
}

__global__ void channel_sum_kernel(const float* __restrict__ sums, const float* __restrict__ bias,
                                   float* __restrict__ out, int n, int channels, float inv_npool) {
  int s = blockIdx.x * blockDim.x + threadIdx.x;
  if (s >= n) return;
  float acc = 0.0f;
  for (int c = 0; c < channels; ++c) acc += sums[(long long)s * channels + c] * inv_npool + bias[c];
  out[s] = acc;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor pool_chain(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double divisor) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int d = (int)y.size(2), h = (int)y.size(3), w = (int)y.size(4);
  int od = d / 2, oh = h / 2, ow = w / 2;
  auto sums = torch::empty({n * c}, y.options());
  auto out = torch::empty({n, 1, 1, 1}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  div_maxpool_sum_kernel<<<(unsigned)(n * c), 256, 0, stream>>>(
      y.data_ptr<float>(), conv_bias.data_ptr<float>(), sums.data_ptr<float>(), (int)c, d, h, w, od, oh, ow,
      (float)(1.0 / divisor));
  channel_sum_kernel<<<(unsigned)((n + 127) / 128), 128, 0, stream>>>(
      sums.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), (int)n, (int)c,
      1.0f / (float)((long long)od * oh * ow));
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_66_conv3d_divide_maxpool_gap_biasadd_sum_cuda",
    cpp_sources="torch::Tensor pool_chain(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double divisor);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["pool_chain"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        divisor: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)
        self.divisor = divisor
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.pool_chain(y, self.conv.bias, self.bias.reshape(-1).contiguous(), self.divisor)
