"""ConvTranspose2d + BatchNorm2d (training mode, batch statistics) + tanh + MaxPool2d: cuDNN transposed
convolution (it has no bias), then three kernels:
1. statistics: a block per (sample, channel) plane sums the plane and its squares shifted by its first value
   (no cancellation; shared-memory trees, fixed order) into the plane's mean and centered M2;
2. finalize: a thread per channel merges its batch planes (Chan's parallel formula, fixed order) into a_c =
   gamma_c * rstd_c and s_c = beta_c - mean_c * a_c, and updates the running statistics;
3. normalize + pool: tanh is increasing, so the max over a window of tanh(a y + s) is tanh(a max y + s) when a
   >= 0 and tanh(a min y + s) when a < 0: a thread per output reads its 2x2 window, keeps the max and the min,
   and applies one tanh.
At the full size the 537 MB conv output is read twice and only the 134 MB pooled output is written; eager runs
the statistics, the normalize (read + write), tanh (read + write) and the pooling (read).

The transposed convolution (69 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.8e-7."""

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

// y: (planes, h, w), out: (planes, oh, ow); 64-bit indices.
__global__ void bn_tanh_maxpool_kernel(const float* __restrict__ y, const float* __restrict__ ss,
                                       float* __restrict__ out, long long planes, int channels, int h, int w,
                                       int oh, int ow) {
  long long total = planes * oh * ow;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long plane = i / ((long long)oh * ow);
    int o = (int)(i % ((long long)oh * ow));
    int c = (int)(plane % channels);
    float a = ss[c], s = ss[channels + c];
    const float* src = y + plane * h * w + (long long)(o / ow) * 2 * w + (o % ow) * 2;
    float hi = fmaxf(fmaxf(src[0], src[1]), fmaxf(src[w], src[w + 1]));
    float lo = fminf(fminf(src[0], src[1]), fminf(src[w], src[w + 1]));
    out[i] = tanhf((a >= 0.0f ? hi : lo) * a + s);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor batchnorm_tanh_pool(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean,
                                  torch::Tensor running_var, double eps, double momentum) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int batch = (int)y.size(0), channels = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  long long rows = (long long)batch * channels;
  auto stats = torch::empty({rows * 2}, y.options());
  auto ss = torch::empty({2 * channels}, y.options());
  auto out = torch::empty({batch, channels, h / 2, w / 2}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  row_stats_kernel<<<(unsigned)rows, 256, 0, stream>>>(y.data_ptr<float>(), stats.data_ptr<float>(), h * w);
  bn_finalize_kernel<<<(channels + 127) / 128, 128, 0, stream>>>(
      stats.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), running_mean.data_ptr<float>(),
      running_var.data_ptr<float>(), ss.data_ptr<float>(), batch, channels, h * w, (float)eps, (float)momentum);
  long long total = out.numel();
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  bn_tanh_maxpool_kernel<<<grid, 256, 0, stream>>>(y.data_ptr<float>(), ss.data_ptr<float>(), out.data_ptr<float>(), rows,
                                                   channels, h, w, h / 2, w / 2);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_57_convtranspose2d_batchnorm_tanh_maxpool_cuda",
    cpp_sources="torch::Tensor batchnorm_tanh_pool(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["batchnorm_tanh_pool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False
        )
        self.batch_norm = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        bn = self.batch_norm
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            return _ext.batchnorm_tanh_pool(y, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps, bn.momentum)
