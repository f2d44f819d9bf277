"""Conv2d + softmax over channels + max over space: cuDNN convolution without its bias, then two kernels. The
max over space of a softmax is exp(max_p (y_c(p) - lse(p))), so no probability is ever written:
1. a block per (sample, chunk of pixels); a thread per pixel (coalesced across the block) forms its logsumexp
   over the channels (bias added; online max and rescaled sum), then re-reads the channels (from L1) and keeps
   the per-channel running max of y_c - lse in its own shared-memory column; block trees reduce the columns
   into one partial per (chunk, channel);
2. a thread per (sample, channel) takes the max over the chunks and exponentiates.
At the full size the 268 MB conv output is read once from HBM; eager adds the bias (read + write), then
softmax (reads and a 268 MB write) and amax (another read).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 8.9e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 64
#define MAX_CHANNELS 128  // the shared columns: MAX_CHANNELS * THREADS floats (32 KB)

__global__ void softmax_chunk_max_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                         float* __restrict__ part, int channels, int hw, int chunks, int chunk_len) {
  __shared__ float best[MAX_CHANNELS * THREADS];
  int s = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const float* base = y + (long long)s * channels * hw;
  for (int c = 0; c < channels; ++c) best[c * THREADS + threadIdx.x] = -INFINITY;
  int start = chunk * chunk_len;
  int end = start + chunk_len < hw ? start + chunk_len : hw;
  for (int p = start + threadIdx.x; p < end; p += THREADS) {
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float a = base[(long long)c * hw + p] + bias[c];
      if (a > m) {
        sum = sum * expf(m - a) + 1.0f;
        m = a;
      } else {
        sum += expf(a - m);
      }
    }
    float lse = m + logf(sum);
    for (int c = 0; c < channels; ++c) {
      float d = base[(long long)c * hw + p] + bias[c] - lse;
      best[c * THREADS + threadIdx.x] = fmaxf(best[c * THREADS + threadIdx.x], d);
    }
  }
  __syncthreads();
  for (int c = 0; c < channels; ++c) {
    float* col = best + c * THREADS;
    for (int k = THREADS / 2; k > 0; k >>= 1) {
      if ((int)threadIdx.x < k) col[threadIdx.x] = fmaxf(col[threadIdx.x], col[threadIdx.x + k]);
      __syncthreads();
    }
    if (threadIdx.x == 0) part[((long long)s * chunks + chunk) * channels + c] = col[0];
  }
}

__global__ void chunk_max_exp_kernel(const float* __restrict__ part, float* __restrict__ out, long long rows,
                                     int channels, int chunks) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // i = sample * channels + channel
  if (i >= rows) return;
  long long s = i / channels;
  int c = (int)(i % channels);
  float m = -INFINITY;
  for (int k = 0; k < chunks; ++k) m = fmaxf(m, part[(s * chunks + k) * channels + c]);
  out[i] = expf(m);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor softmax_spatial_max(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  TORCH_CHECK(c <= 128, "at most 128 channels");
  int chunk_len = 512;  // pixels per block: 8 per thread
  int chunks = (hw + chunk_len - 1) / chunk_len;
  auto part = torch::empty({n * chunks * c}, y.options());
  auto out = torch::empty({n, c}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  softmax_chunk_max_kernel<<<(unsigned)(n * chunks), 64, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(),
                                                                      part.data_ptr<float>(), c, hw, chunks, chunk_len);
  chunk_max_exp_kernel<<<(unsigned)((n * c + 127) / 128), 128, 0, stream>>>(part.data_ptr<float>(), out.data_ptr<float>(),
                                                                            n * c, c, chunks);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_51_conv2d_channelsoftmax_spatialmax_cuda",
    cpp_sources="torch::Tensor softmax_spatial_max(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["softmax_spatial_max"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.softmax_spatial_max(y, self.conv.bias)
