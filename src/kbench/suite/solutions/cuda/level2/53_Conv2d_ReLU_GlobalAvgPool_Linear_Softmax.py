"""Classifier head, conv + ReLU + global average pool + Linear + softmax: cuDNN convolution without its bias,
then two kernels:
1. a block per (sample, channel) plane adds the bias, applies ReLU and averages (shared-memory tree, fixed
   order): the 403 MB conv output (full size) is read once and the activation never written;
2. a block per sample: the pooled vector goes to shared memory, each thread computes logits for its classes
   (the 1000 x 256 weight is L2 resident) into the output row, and block trees give the max and the sum of
   exponentials for the softmax, applied in place.
Eager adds the bias (read + write), runs relu (read + write) and mean (read), then addmm and softmax.

The convolution (116 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 3.7e-9."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256
#define MAX_FEATURES 4096  // the pooled vector in shared memory (16 KB)

// Sum / max over the block (blockDim.x == THREADS, a power of two), fixed order; every thread gets the result.
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

__device__ float block_max(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) smem[threadIdx.x] = fmaxf(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  float r = smem[0];
  __syncthreads();
  return r;
}

__global__ void bias_relu_mean_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                      float* __restrict__ pooled, int channels, int hw) {
  __shared__ float smem[THREADS];
  long long plane = blockIdx.x;
  const float* p = y + plane * hw;
  float b = bias[plane % channels];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < hw; i += THREADS) acc += fmaxf(p[i] + b, 0.0f);
  float total = block_sum(acc, smem);
  if (threadIdx.x == 0) pooled[plane] = total / (float)hw;
}

__global__ void linear_softmax_kernel(const float* __restrict__ pooled, const float* __restrict__ w,
                                      const float* __restrict__ fb, float* __restrict__ out, int features,
                                      int classes) {
  __shared__ float smem[THREADS];
  __shared__ float feat[MAX_FEATURES];
  int n = blockIdx.x;
  for (int k = threadIdx.x; k < features; k += THREADS) feat[k] = pooled[(long long)n * features + k];
  __syncthreads();
  float* row = out + (long long)n * classes;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < classes; j += THREADS) {
    const float* wj = w + (long long)j * features;
    float acc = fb[j];
    for (int k = 0; k < features; ++k) acc += wj[k] * feat[k];
    row[j] = acc;
    m = fmaxf(m, acc);
  }
  float mx = block_max(m, smem);
  float s = 0.0f;
  for (int j = threadIdx.x; j < classes; j += THREADS) s += expf(row[j] - mx);
  float inv = 1.0f / block_sum(s, smem);
  for (int j = threadIdx.x; j < classes; j += THREADS) row[j] = expf(row[j] - mx) * inv;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor head(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor w, torch::Tensor fb) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  int classes = (int)w.size(0);
  TORCH_CHECK(c <= 4096 && w.size(1) == c, "at most 4096 features, matching the linear layer");
  auto pooled = torch::empty({n * c}, y.options());
  auto out = torch::empty({n, classes}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  bias_relu_mean_kernel<<<(unsigned)(n * c), 256, 0, stream>>>(y.data_ptr<float>(), conv_bias.data_ptr<float>(),
                                                                pooled.data_ptr<float>(), c, hw);
  linear_softmax_kernel<<<(unsigned)n, 256, 0, stream>>>(pooled.data_ptr<float>(), w.data_ptr<float>(),
                                                         fb.data_ptr<float>(), out.data_ptr<float>(), c, classes);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_53_conv2d_relu_gap_linear_softmax_cuda",
    cpp_sources="torch::Tensor head(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor w, torch::Tensor fb);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["head"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_classes: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc = nn.Linear(out_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.head(y, self.conv.bias, self.fc.weight, self.fc.bias)
