"""Conv3d + HardSwish + ReLU + softmax over channels + spatial mean: cuDNN convolution without its bias, then
two kernels:
1. a block per (sample, chunk of voxels); a thread per voxel (coalesced across the block) applies
   relu(hardswish(y + b_c)), takes the softmax over the channels (one pass for the max and rescaled sum, one
   re-read from L1 for the probabilities) and adds the probabilities to its own shared-memory column; the
   block then sums the columns per channel (fixed-order trees) into one partial per (chunk, channel);
2. a thread per (sample, channel) adds the chunks' partials in order and divides by the volume.
The 220 MB conv output (full size) is read once from HBM and nothing of its size is written; eager adds the
bias, then runs hardswish, relu and softmax (a read and a write each) and the mean (a read).

The convolution (48 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 7.5e-9."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 128
#define MAX_CHANNELS 64  // the shared columns: MAX_CHANNELS * THREADS floats (32 KB)

__device__ __forceinline__ float act(float v) {
  v = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f);
  return fmaxf(v, 0.0f);
}

__global__ void act_softmax_chunk_sum_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                             float* __restrict__ part, int channels, long long vol, int chunks,
                                             long long chunk_len) {
  __shared__ float acc[MAX_CHANNELS * THREADS];
  int s = blockIdx.x / chunks, chunk = blockIdx.x % chunks;
  const float* base = y + (long long)s * channels * vol;
  for (int c = 0; c < channels; ++c) acc[c * THREADS + threadIdx.x] = 0.0f;
  long long start = (long long)chunk * chunk_len;
  long long end = start + chunk_len < vol ? start + chunk_len : vol;
  for (long long v = start + threadIdx.x; v < end; v += THREADS) {
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float a = act(base[c * vol + v] + bias[c]);
      if (a > m) {
        sum = sum * expf(m - a) + 1.0f;
        m = a;
      } else {
        sum += expf(a - m);
      }
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < channels; ++c) acc[c * THREADS + threadIdx.x] += expf(act(base[c * vol + v] + bias[c]) - m) * inv;
  }
  __syncthreads();
  for (int c = 0; c < channels; ++c) {
    float* col = acc + c * THREADS;
    for (int k = THREADS / 2; k > 0; k >>= 1) {
      if ((int)threadIdx.x < k) col[threadIdx.x] += col[threadIdx.x + k];
      __syncthreads();
    }
    if (threadIdx.x == 0) part[((long long)s * chunks + chunk) * channels + c] = col[0];
  }
}

__global__ void chunk_mean_kernel(const float* __restrict__ part, float* __restrict__ out, long long rows,
                                  int channels, int chunks, float inv_vol) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;  // i = sample * channels + channel
  if (i >= rows) return;
  long long s = i / channels;
  int c = (int)(i % channels);
  float acc = 0.0f;
  for (int k = 0; k < chunks; ++k) acc += part[(s * chunks + k) * channels + c];
  out[i] = acc * inv_vol;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor softmax_mean(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1);
  TORCH_CHECK(c <= 64, "at most 64 channels");
  long long vol = y.numel() / (n * c);
  long long chunk_len = 1024;  // voxels per block: 8 per thread
  int chunks = (int)((vol + chunk_len - 1) / chunk_len);
  auto part = torch::empty({n * chunks * c}, y.options());
  auto out = torch::empty({n, c}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  act_softmax_chunk_sum_kernel<<<(unsigned)(n * chunks), 128, 0, stream>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), part.data_ptr<float>(), c, vol, chunks, chunk_len);
  chunk_mean_kernel<<<(unsigned)((n * c + 127) / 128), 128, 0, stream>>>(
      part.data_ptr<float>(), out.data_ptr<float>(), n * c, c, chunks, 1.0f / (float)vol);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_65_conv3d_hardswish_relu_softmax_mean_cuda",
    cpp_sources="torch::Tensor softmax_mean(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["softmax_mean"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.softmax_mean(y, self.conv.bias)
