"""ConvTranspose3d + mean over depth + bias + softmax over channels + tanh + scale, with the depth axis of the
transposed convolution removed by an exact rewrite. With stride 1 along depth, output depth o receives x[i]
through depth tap k exactly when o = i - pad + k, so summing the output over depth gives, for each tap k, the
input summed over the depths i whose o stays inside the output:

    sum_o y[n, :, o] = conv_transpose2d(A, W'),  A[n, k * Cin + i] = sum_{d in range_k} x[n, i, d],
    W'[k * Cin + i, o] = W[i, o, k]

Three steps:
1. a kernel (a thread per (sample, input channel, pixel), coalesced along the pixels) reads x once (134 MB at
   the full size) and writes the K depth-aggregated planes (25 MB);
2. cuDNN runs the remaining 2-D transposed convolution: 7.2 GFLOP instead of 116 (16x fewer, the depth), IEEE
   fp32 as the reference; its 17 MB output is the depth sum;
3. a thread per output pixel divides by the depth, adds both biases, takes the softmax over the channels
   (values parked in a shared-memory column) and writes tanh(p) * scale in place.
Eager runs the full 3-D transposed convolution (a 268 MB output), the mean, add, softmax, tanh and mul. The
summation order differs from the 3-D convolution's (fp32 throughout).
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 8.9e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 128
#define MAX_CHANNELS 64  // the shared column: MAX_CHANNELS * THREADS floats (32 KB)
#define MAX_TAPS 8

// agg[n, k * cin + i, p] = sum over depths d with 0 <= d - pad + k < dout of x[n, i, d, p]
__global__ void depth_aggregate_kernel(const float* __restrict__ x, float* __restrict__ agg, long long rows, int cin,
                                       int depth, int hw, int dout, int pad, int taps) {
  long long total = rows * hw;  // rows = n * cin
  for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    long long row = t / hw;
    int p = (int)(t % hw);
    const float* src = x + row * depth * hw + p;
    float acc[MAX_TAPS];
    for (int k = 0; k < taps; ++k) acc[k] = 0.0f;
    for (int d = 0; d < depth; ++d) {
      float v = src[(long long)d * hw];
      for (int k = 0; k < taps; ++k)
        if (d >= pad - k && d <= dout - 1 + pad - k) acc[k] += v;
    }
    long long n = row / cin;
    int i = (int)(row % cin);
    for (int k = 0; k < taps; ++k) agg[((n * taps + k) * cin + i) * hw + p] = acc[k];
  }
}

__global__ void mean_bias_softmax_tanh_kernel(float* __restrict__ s, const float* __restrict__ conv_bias,
                                              const float* __restrict__ bias, long long n, int channels, int hw,
                                              float inv_depth, float scale) {
  __shared__ float col[MAX_CHANNELS * THREADS];
  long long total = n * hw;
  for (long long t = (long long)blockIdx.x * THREADS + threadIdx.x; t < total; t += (long long)gridDim.x * THREADS) {
    long long smp = t / hw;
    int p = (int)(t % hw);
    float* base = s + smp * channels * hw + p;
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float v = base[(long long)c * hw] * inv_depth + conv_bias[c] + bias[c];
      col[c * THREADS + threadIdx.x] = v;
      if (v > m) {
        sum = sum * expf(m - v) + 1.0f;
        m = v;
      } else {
        sum += expf(v - m);
      }
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < channels; ++c) base[(long long)c * hw] = tanhf(expf(col[c * THREADS + threadIdx.x] - m) * inv) * scale;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor depth_aggregate(torch::Tensor x, int64_t taps, int64_t pad) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  TORCH_CHECK(taps <= 8, "at most 8 depth taps");
  long long n = x.size(0);
  int cin = (int)x.size(1), depth = (int)x.size(2), h = (int)x.size(3), w = (int)x.size(4);
  int dout = depth - 1 + (int)taps - 2 * (int)pad;
  auto agg = torch::empty({n, taps * cin, h, w}, x.options());
  long long total = n * cin * h * w;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  depth_aggregate_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), agg.data_ptr<float>(), n * cin, cin, depth, h * w, dout, (int)pad, (int)taps);
  return agg;
}

void softmax_tanh(torch::Tensor s, torch::Tensor conv_bias, torch::Tensor bias, double inv_depth, double scale) {
  TORCH_CHECK(s.is_cuda() && s.is_contiguous() && s.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = s.size(0);
  int c = (int)s.size(1), hw = (int)(s.size(2) * s.size(3));
  TORCH_CHECK(c <= 64, "at most 64 channels");
  long long total = n * hw;
  int grid = (int)std::max(1LL, std::min((total + 127) / 128, 16384LL));
  mean_bias_softmax_tanh_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      s.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), n, c, hw, (float)inv_depth, (float)scale);
}
"""

_ext = load_inline(
    name="kbench_l2_60_convtranspose3d_depthmean_softmax_tanh_cuda",
    cpp_sources=(
        "torch::Tensor depth_aggregate(torch::Tensor x, int64_t taps, int64_t pad);\n"
        "void softmax_tanh(torch::Tensor s, torch::Tensor conv_bias, torch::Tensor bias, double inv_depth, double scale);"
    ),
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["depth_aggregate", "softmax_tanh"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        padding: int,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, padding=padding)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        assert ct.stride[0] == 1 and ct.dilation[0] == 1 and ct.output_padding[0] == 0 and ct.groups == 1
        x = x.contiguous()
        kd, pad = ct.kernel_size[0], ct.padding[0]
        dout = x.shape[2] - 1 + kd - 2 * pad
        agg = _ext.depth_aggregate(x, kd, pad)
        # W'[k * cin + i, o, kh, kw] = W[i, o, k, kh, kw]: a 2-D transposed convolution over the aggregates
        w2 = ct.weight.permute(2, 0, 1, 3, 4).reshape(kd * x.shape[1], ct.out_channels, *ct.kernel_size[1:])
        s = F.conv_transpose2d(agg, w2, None, ct.stride[1:], ct.padding[1:], ct.output_padding[1:]).contiguous()
        _ext.softmax_tanh(s, ct.bias, self.bias.reshape(-1).contiguous(), 1.0 / dout, self.scale)
        n, c, oh, ow = s.shape
        return s.view(n, c, 1, oh, ow)
