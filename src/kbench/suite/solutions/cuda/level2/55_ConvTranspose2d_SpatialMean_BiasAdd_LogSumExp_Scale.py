"""ConvTranspose2d + spatial mean + bias + logsumexp over channels + scale, with the transposed convolution
removed by an exact rewrite. With stride 1 and no padding every input pixel reaches every kernel tap inside
the output, so the sum over the output plane is linear in the input plane sums:

    sum_{h,w} y[n, o] = sum_i (sum_{h,w} x[n, i]) * (sum_{kh,kw} W[i, o, kh, kw])

Two kernels:
1. a block per (sample, input channel) plane sums the input (shared-memory tree, fixed order): the only pass
   over memory, 201 MB at the full size;
2. a block per sample: each thread forms one output channel's mean from the plane sums and the tap-summed
   weights, adds both biases, and the block reduces scale * logsumexp over the channels.
The 116 GFLOP transposed convolution and its 415 MB output never exist; eager runs both, then mean, add,
logsumexp and mul. The summation order differs from the convolution's (fp32 throughout); the tolerance is
1e-3.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.9e-6."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256

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

__global__ void plane_sum_kernel(const float* __restrict__ x, float* __restrict__ sums, int hw) {
  __shared__ float smem[THREADS];
  const float* p = x + (long long)blockIdx.x * hw;
  float acc = 0.0f;
  for (int i = threadIdx.x; i < hw; i += THREADS) acc += p[i];
  float total = block_sum(acc, smem);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

// w: (cin, cout, kk) as ConvTranspose2d stores it
__global__ void mean_lse_kernel(const float* __restrict__ sums, const float* __restrict__ w,
                                const float* __restrict__ conv_bias, const float* __restrict__ bias,
                                float* __restrict__ out, int cin, int cout, int kk, float inv_area, float scale) {
  __shared__ float smem[THREADS];
  int n = blockIdx.x;
  float m_local = -INFINITY;
  // a thread per output channel; the means are formed twice (for the max, then for the sum): cin * cout * kk
  // multiply-adds per sample, from L2
  for (int o = threadIdx.x; o < cout; o += THREADS) {
    float acc = 0.0f;
    for (int i = 0; i < cin; ++i) {
      const float* wp = w + ((long long)i * cout + o) * kk;
      float ws = 0.0f;
      for (int k = 0; k < kk; ++k) ws += wp[k];
      acc += sums[(long long)n * cin + i] * ws;
    }
    m_local = fmaxf(m_local, acc * inv_area + conv_bias[o] + bias[o]);
  }
  float mx = block_max(m_local, smem);
  float s_local = 0.0f;
  for (int o = threadIdx.x; o < cout; o += THREADS) {
    float acc = 0.0f;
    for (int i = 0; i < cin; ++i) {
      const float* wp = w + ((long long)i * cout + o) * kk;
      float ws = 0.0f;
      for (int k = 0; k < kk; ++k) ws += wp[k];
      acc += sums[(long long)n * cin + i] * ws;
    }
    s_local += expf(acc * inv_area + conv_bias[o] + bias[o] - mx);
  }
  float s = block_sum(s_local, smem);
  if (threadIdx.x == 0) out[n] = (mx + logf(s)) * scale;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor mean_lse(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  TORCH_CHECK(w.is_contiguous(), "expected a contiguous weight");
  long long n = x.size(0);
  int cin = (int)x.size(1), h = (int)x.size(2), wd = (int)x.size(3);
  int cout = (int)w.size(1), kh = (int)w.size(2), kw = (int)w.size(3);
  auto sums = torch::empty({n * cin}, x.options());
  auto out = torch::empty({n, 1, 1, 1}, x.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  plane_sum_kernel<<<(unsigned)(n * cin), 256, 0, stream>>>(x.data_ptr<float>(), sums.data_ptr<float>(), h * wd);
  float inv_area = 1.0f / (float)((long long)(h + kh - 1) * (wd + kw - 1));
  mean_lse_kernel<<<(unsigned)n, 256, 0, stream>>>(sums.data_ptr<float>(), w.data_ptr<float>(), conv_bias.data_ptr<float>(),
                                                   bias.data_ptr<float>(), out.data_ptr<float>(), cin, cout, kh * kw,
                                                   inv_area, (float)scale);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_55_convtranspose2d_spatialmean_biasadd_lse_scale_cuda",
    cpp_sources="torch::Tensor mean_lse(torch::Tensor x, torch::Tensor w, torch::Tensor conv_bias, torch::Tensor bias, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["mean_lse"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, scale: float, bias_shape: tuple[int, ...]
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        # the rewrite needs every tap of every input pixel inside the output
        assert ct.stride == (1, 1) and ct.padding == (0, 0) and ct.output_padding == (0, 0)
        assert ct.dilation == (1, 1) and ct.groups == 1
        return _ext.mean_lse(x.contiguous(), ct.weight, ct.bias, self.bias.reshape(-1).contiguous(), self.scale)
