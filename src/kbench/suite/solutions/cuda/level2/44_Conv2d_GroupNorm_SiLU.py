"""Conv2d + GroupNorm + SiLU: cuDNN convolution without its bias, then two kernels over its output, which is
read twice and written once (the floor without fusing into the convolution):
1. statistics: a block per (sample, channel) row sums the row and its squares shifted by the row's first value
   (no cancellation; shared-memory trees, fixed order) into the row's mean and centered M2;
2. normalize: a block per row merges its group's rows (Chan's parallel formula, fixed order; the conv bias,
   constant per channel, moves a row's mean but not its M2, so it is added there instead of to every element)
   and writes silu(y * a_c + s_c) in place, a_c = gamma_c * rstd_g, s_c = beta_c + (b_c - mean_g) * a_c.
Eager runs conv + bias, group_norm (its own statistics and normalize passes) and silu: ~6 passes over the 268
MB conv output at the full size against 3 here.

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.2e-6."""

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

__device__ __forceinline__ float act(float v) { return v / (1.0f + expf(-v)); }

// stats[2 * row] = mean, stats[2 * row + 1] = centered M2 of the row (the conv output without its bias)
__global__ void row_stats_kernel(const float* __restrict__ y, float* __restrict__ stats, int len) {
  __shared__ float smem[THREADS];
  long long row = blockIdx.x;
  const float* p = y + row * len;
  float shift = p[0];
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = threadIdx.x; i < len; i += THREADS) {
    float d = p[i] - shift;
    s1 += d;
    s2 += d * d;
  }
  float t1 = block_sum(s1, smem);
  float t2 = block_sum(s2, smem);
  if (threadIdx.x == 0) {
    stats[2 * row] = shift + t1 / len;
    stats[2 * row + 1] = fmaxf(t2 - t1 * t1 / len, 0.0f);
  }
}

__global__ void groupnorm_act_kernel(float* __restrict__ y, const float* __restrict__ stats,
                                     const float* __restrict__ conv_bias, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, int channels, int cpg, int len, float eps) {
  long long row = blockIdx.x;
  int c = (int)(row % channels);
  long long first = row - c % cpg;  // the group's first row
  int c0 = c - c % cpg;
  float mean = 0.0f;
  for (int k = 0; k < cpg; ++k) mean += stats[2 * (first + k)] + conv_bias[c0 + k];
  mean /= cpg;
  float m2 = 0.0f;
  for (int k = 0; k < cpg; ++k) {
    float d = stats[2 * (first + k)] + conv_bias[c0 + k] - mean;
    m2 += stats[2 * (first + k) + 1] + (float)len * d * d;
  }
  float a = gamma[c] * rsqrtf(m2 / ((float)cpg * len) + eps);
  float s = beta[c] + (conv_bias[c] - mean) * a;
  float* p = y + row * len;
  for (int i = threadIdx.x; i < len; i += THREADS) p[i] = act(p[i] * a + s);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void groupnorm_act(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long rows = y.size(0) * y.size(1);
  int channels = (int)y.size(1);
  int len = (int)(y.numel() / rows);
  auto stats = torch::empty({rows * 2}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  row_stats_kernel<<<(unsigned)rows, 256, 0, stream>>>(y.data_ptr<float>(), stats.data_ptr<float>(), len);
  groupnorm_act_kernel<<<(unsigned)rows, 256, 0, stream>>>(y.data_ptr<float>(), stats.data_ptr<float>(), conv_bias.data_ptr<float>(),
                                                           gamma.data_ptr<float>(), beta.data_ptr<float>(), channels,
                                                           channels / (int)groups, len, (float)eps);
}
"""

_ext = load_inline(
    name="kbench_l2_44_conv2d_groupnorm_silu_cuda",
    cpp_sources="void groupnorm_act(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["groupnorm_act"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        gn = self.group_norm
        _ext.groupnorm_act(y, self.conv.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)
        return y
