"""Conv2d + BatchNorm (training mode, batch statistics) + ReLU: cuDNN convolution without its bias (NCHW:
under IEEE fp32 its channels_last path is slower); one kernel with a block per (sample, channel) plane for
partial statistics (shifted sums, merged with Chan's formula), one small kernel that merges a channel's
partials in a fixed order and updates the running statistics, and one vectorised kernel that normalizes
and applies ReLU in place. The conv bias cancels in the normalized output; it only shifts the running mean,
where it is added back (eager: conv + bias + batch_norm's stats/normalize + relu)."""

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

// Statistics of the whole block, merged in a fixed order; every thread gets the result. smem holds 32 entries.
__device__ Stats block_merge(Stats s, Stats* smem) {
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

// grid: (samples, channels). Each block reduces one (sample, channel) plane into partial[c * n + sample].
// A thread sums (v - k) and (v - k)^2 with k its first value (shifted data: no cancellation when k is near
// the mean); V = 4 when the plane size is a multiple of 4 (every plane then starts 16-byte aligned).
template <int V>
__global__ void plane_stats_kernel(const float* __restrict__ y, Stats* __restrict__ partial, int channels, int hw) {
  __shared__ Stats smem[32];
  int sample = blockIdx.x, c = blockIdx.y;
  const float* plane = y + ((long long)sample * channels + c) * hw;
  int first = threadIdx.x * V;
  float k = first < hw ? plane[first] : 0.0f;
  float s1 = 0.0f, s2 = 0.0f;
  int cnt = 0;
  if constexpr (V == 4) {
    for (int i = first; i < hw; i += blockDim.x * 4) {
      float4 v = *reinterpret_cast<const float4*>(plane + i);
      float d0 = v.x - k, d1 = v.y - k, d2 = v.z - k, d3 = v.w - k;
      s1 += (d0 + d1) + (d2 + d3);
      s2 += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
      cnt += 4;
    }
  } else {
    for (int i = first; i < hw; i += blockDim.x) {
      float d = plane[i] - k;
      s1 += d;
      s2 += d * d;
      cnt += 1;
    }
  }
  Stats s{0.0f, 0.0f, 0.0f};
  if (cnt > 0) {
    float nf = (float)cnt, dm = s1 / nf;
    s = {nf, k + dm, fmaxf(s2 - s1 * dm, 0.0f)};
  }
  s = block_merge(s, smem);
  if (threadIdx.x == 0) partial[(long long)c * gridDim.x + sample] = s;
}

// grid: channels. Merges the channel's n partials in order; writes scale/shift so that
// out = relu(v * scale + shift) and updates the running stats.
__global__ void finalize_stats_kernel(const Stats* __restrict__ partial, const float* __restrict__ conv_bias,
                                      const float* __restrict__ gamma, const float* __restrict__ beta,
                                      float* __restrict__ running_mean, float* __restrict__ running_var,
                                      float* __restrict__ scale_shift, int n, int channels, float eps,
                                      float momentum) {
  __shared__ Stats smem[32];
  int c = blockIdx.x;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int b = threadIdx.x; b < n; b += blockDim.x) s = merge(s, partial[(long long)c * n + b]);
  s = block_merge(s, smem);
  if (threadIdx.x == 0) {
    float var = s.m2 / s.n;
    float scale = gamma[c] * rsqrtf(var + eps);
    scale_shift[c] = scale;
    scale_shift[channels + c] = beta[c] - s.mean * scale;
    running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (s.mean + conv_bias[c]);
    running_var[c] = (1.0f - momentum) * running_var[c] + momentum * s.m2 / fmaxf(s.n - 1.0f, 1.0f);
  }
}

// V = 4 when the plane size is a multiple of 4, so a float4 never straddles two channels.
template <int V>
__global__ void normalize_relu_kernel(float* __restrict__ y, const float* __restrict__ scale_shift,
                                      long long total, int hw, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / hw) % channels);
    float a = scale_shift[c], b = scale_shift[channels + c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = fmaxf(v.x * a + b, 0.0f); v.y = fmaxf(v.y * a + b, 0.0f);
      v.z = fmaxf(v.z * a + b, 0.0f); v.w = fmaxf(v.w * a + b, 0.0f);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = fmaxf(y[i] * a + b, 0.0f);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

void batchnorm_relu(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor gamma, torch::Tensor beta,
                    torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)y.size(0), c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  TORCH_CHECK(c <= 65535, "too many channels for grid.y");
  auto scale_shift = torch::empty({2 * c}, y.options());
  auto partial = torch::empty({(long long)c * n * 3}, y.options());  // Stats (3 floats) per (channel, sample)
  Stats* part = reinterpret_cast<Stats*>(partial.data_ptr<float>());
  auto stream = at::cuda::getCurrentCUDAStream();
  dim3 grid((unsigned)n, (unsigned)c);
  if (hw % 4 == 0) {
    plane_stats_kernel<4><<<grid, 256, 0, stream>>>(y.data_ptr<float>(), part, c, hw);
  } else {
    plane_stats_kernel<1><<<grid, 256, 0, stream>>>(y.data_ptr<float>(), part, c, hw);
  }
  finalize_stats_kernel<<<c, 256, 0, stream>>>(
      part, conv_bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
      running_mean.data_ptr<float>(), running_var.data_ptr<float>(), scale_shift.data_ptr<float>(), n, c,
      (float)eps, (float)momentum);
  long long total = y.numel();
  if (hw % 4 == 0) {
    normalize_relu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), scale_shift.data_ptr<float>(), total, hw, c);
  } else {
    normalize_relu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), scale_shift.data_ptr<float>(), total, hw, c);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_22_conv2d_batchnorm_relu_cuda",
    cpp_sources="void batchnorm_relu(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor gamma, torch::Tensor beta, "
    "torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["batchnorm_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        bn = self.batch_norm
        conv_bias = y.new_zeros(y.shape[1])  # the conv has no bias; the kernels take one
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            _ext.batchnorm_relu(
                y, conv_bias, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps, bn.momentum
            )
        return y
