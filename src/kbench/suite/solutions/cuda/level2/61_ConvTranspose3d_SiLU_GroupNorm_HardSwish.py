"""ConvTranspose3d + SiLU + GroupNorm + HardSwish: cuDNN transposed convolution without its bias, then two
kernels over its output, which is read twice and written once (the floor without fusing into the convolution):
1. statistics: a block per (sample, channel) plane applies silu(y + b_c) on the fly and sums the values and
   their squares shifted by the plane's first value (no cancellation; shared-memory trees, fixed order) into
   the plane's mean and centered M2; the SiLU output is never written;
2. normalize: a block per plane merges its group's planes (Chan's parallel formula, fixed order), recomputes
   silu(y + b_c) and writes hardswish(gamma_c * (s - mean_g) * rstd_g + beta_c) in place.
Eager adds the bias, then runs silu, group_norm (statistics and normalize) and hardswish: ~8 passes over the
504 MB conv output at the full size, against 3 here.

The transposed convolution (29 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.4e-6."""

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

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// stats[2 * plane] = mean, stats[2 * plane + 1] = centered M2 of silu(y + b_c) over the plane
__global__ void silu_plane_stats_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ stats, int channels, int len) {
  __shared__ float smem[THREADS];
  long long plane = blockIdx.x;
  const float* p = y + plane * len;
  float b = bias[plane % channels];
  float shift = silu(p[0] + b);
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = threadIdx.x; i < len; i += THREADS) {
    float d = silu(p[i] + b) - shift;
    s1 += d;
    s2 += d * d;
  }
  float t1 = block_sum(s1, smem);
  float t2 = block_sum(s2, smem);
  if (threadIdx.x == 0) {
    stats[2 * plane] = shift + t1 / len;
    stats[2 * plane + 1] = fmaxf(t2 - t1 * t1 / len, 0.0f);
  }
}

__global__ void silu_groupnorm_hardswish_kernel(float* __restrict__ y, const float* __restrict__ stats,
                                                const float* __restrict__ bias, const float* __restrict__ gamma,
                                                const float* __restrict__ beta, int channels, int cpg, int len,
                                                float eps) {
  long long plane = blockIdx.x;
  int c = (int)(plane % channels);
  long long first = plane - c % cpg;  // the group's first plane
  float mean = 0.0f;
  for (int k = 0; k < cpg; ++k) mean += stats[2 * (first + k)];
  mean /= cpg;
  float m2 = 0.0f;
  for (int k = 0; k < cpg; ++k) {
    float d = stats[2 * (first + k)] - mean;
    m2 += stats[2 * (first + k) + 1] + (float)len * d * d;
  }
  float a = gamma[c] * rsqrtf(m2 / ((float)cpg * len) + eps);
  float s = beta[c] - mean * a;
  float b = bias[c];
  float* p = y + plane * len;
  for (int i = threadIdx.x; i < len; i += THREADS) {
    float z = silu(p[i] + b) * a + s;
    p[i] = z * fminf(fmaxf(z + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void silu_groupnorm_hardswish(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long planes = y.size(0) * y.size(1);
  int channels = (int)y.size(1);
  int len = (int)(y.numel() / planes);
  auto stats = torch::empty({planes * 2}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  silu_plane_stats_kernel<<<(unsigned)planes, 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), stats.data_ptr<float>(), channels, len);
  silu_groupnorm_hardswish_kernel<<<(unsigned)planes, 256, 0, stream>>>(
      y.data_ptr<float>(), stats.data_ptr<float>(), bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
      channels, channels / (int)groups, len, (float)eps);
}
"""

_ext = load_inline(
    name="kbench_l2_61_convtranspose3d_silu_groupnorm_hardswish_cuda",
    cpp_sources="void silu_groupnorm_hardswish(torch::Tensor y, torch::Tensor bias, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["silu_groupnorm_hardswish"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        num_groups: int,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.group_norm = nn.GroupNorm(num_groups, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        gn = self.group_norm
        _ext.silu_groupnorm_hardswish(y, ct.bias, gn.weight, gn.bias, gn.num_groups, gn.eps)
        return y
