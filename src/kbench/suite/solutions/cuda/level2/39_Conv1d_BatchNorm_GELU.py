"""Conv1d + BatchNorm1d (training mode, batch statistics) + GELU: cuDNN convolution (it has no bias), then
three kernels over its output, which is read twice and written once:
1. statistics: a block per (sample, channel) row sums the row and its squares shifted by the row's first value
   (no cancellation; shared-memory trees, fixed order) into the row's mean and centered M2;
2. finalize: a thread per channel merges its batch rows (Chan's parallel formula, fixed order) into a_c =
   gamma_c * rstd_c and s_c = beta_c - mean_c * a_c, and updates the running statistics as training-mode
   BatchNorm does;
3. apply: gelu(y * a_c + s_c) in place, vectorised (float4 when the row length allows; erf GELU, F.gelu's
   default).
Eager runs conv, batch_norm (a statistics pass and a normalize pass) and gelu: ~5 passes over the 537 MB conv
output at the full size against 3 here.

The convolution (103 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 7.2e-7."""

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

// stats[2 * row] = mean, stats[2 * row + 1] = centered M2 of the row
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

// ss[c] = a_c, ss[channels + c] = s_c; rows of channel c are i * channels + c
__global__ void bn_finalize_kernel(const float* __restrict__ stats, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ running_mean,
                                   float* __restrict__ running_var, float* __restrict__ ss, int batch, int channels,
                                   int len, float eps, float momentum) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float mean = 0.0f;
  for (int i = 0; i < batch; ++i) mean += stats[2 * ((long long)i * channels + c)];
  mean /= batch;
  float m2 = 0.0f;
  for (int i = 0; i < batch; ++i) {
    long long r = (long long)i * channels + c;
    float d = stats[2 * r] - mean;
    m2 += stats[2 * r + 1] + (float)len * d * d;
  }
  float total = (float)batch * len;
  float a = gamma[c] * rsqrtf(m2 / total + eps);
  ss[c] = a;
  ss[channels + c] = beta[c] - mean * a;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
  running_var[c] = (1.0f - momentum) * running_var[c] + momentum * m2 / fmaxf(total - 1.0f, 1.0f);
}

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

// In place over (rows, len); V = 4 when len is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void bn_gelu_kernel(float* __restrict__ y, const float* __restrict__ ss, long long total, int len, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / len) % channels);
    float a = ss[c], s = ss[channels + c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = gelu(v.x * a + s); v.y = gelu(v.y * a + s); v.z = gelu(v.z * a + s); v.w = gelu(v.w * a + s);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = gelu(y[i] * a + s);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void batchnorm_gelu(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean,
                    torch::Tensor running_var, double eps, double momentum) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int batch = (int)y.size(0), channels = (int)y.size(1);
  long long rows = (long long)batch * channels;
  int len = (int)(y.numel() / rows);
  auto stats = torch::empty({rows * 2}, y.options());
  auto ss = torch::empty({2 * channels}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  row_stats_kernel<<<(unsigned)rows, 256, 0, stream>>>(y.data_ptr<float>(), stats.data_ptr<float>(), len);
  bn_finalize_kernel<<<(channels + 127) / 128, 128, 0, stream>>>(
      stats.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), running_mean.data_ptr<float>(),
      running_var.data_ptr<float>(), ss.data_ptr<float>(), batch, channels, len, (float)eps, (float)momentum);
  long long total = y.numel();
  if (len % 4 == 0) {
    bn_gelu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), ss.data_ptr<float>(), total, len, channels);
  } else {
    bn_gelu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), ss.data_ptr<float>(), total, len, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_39_conv1d_batchnorm_gelu_cuda",
    cpp_sources="void batchnorm_gelu(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["batchnorm_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.batch_norm = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv1d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        bn = self.batch_norm
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            _ext.batchnorm_gelu(y, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps, bn.momentum)
        return y
