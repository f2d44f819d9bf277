"""ConvTranspose3d + scale + softmax over channels: cuDNN transposed convolution without its bias (NCHW:
under IEEE fp32 its channels_last path is slower), then one kernel (a thread per (sample, voxel), coalesced
across voxels) adds the bias and scales while loading up to 64 channel values into registers, so the tensor
is read once and written once in place; more channels fall back to an online softmax that reads twice
(eager: conv_transpose + bias + mul + softmax)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define SOFTMAX_CACHE 64  // channel values a thread keeps in registers

__global__ void bias_scale_softmax_kernel(float* __restrict__ y, const float* __restrict__ bias, int n,
                                          int channels, long long spatial, float scale) {
  long long total = (long long)n * spatial;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    float* base = y + (i / spatial) * channels * spatial + (i % spatial);
    if (channels <= SOFTMAX_CACHE) {
      // Fully unrolled with constant indices, so v stays in registers; all loads are issued up front.
      float v[SOFTMAX_CACHE];
      float m = -INFINITY;
#pragma unroll
      for (int c = 0; c < SOFTMAX_CACHE; ++c) {
        if (c < channels) {
          v[c] = (base[c * spatial] + __ldg(bias + c)) * scale;
          m = fmaxf(m, v[c]);
        }
      }
      float s = 0.0f;
#pragma unroll
      for (int c = 0; c < SOFTMAX_CACHE; ++c) {
        if (c < channels) {
          v[c] = expf(v[c] - m);
          s += v[c];
        }
      }
      float inv = 1.0f / s;
#pragma unroll
      for (int c = 0; c < SOFTMAX_CACHE; ++c) {
        if (c < channels) base[c * spatial] = v[c] * inv;
      }
    } else {
      float m = -INFINITY, s = 0.0f;
      for (int c = 0; c < channels; ++c) {
        float v = (base[c * spatial] + bias[c]) * scale;
        if (v > m) { s = s * expf(m - v) + 1.0f; m = v; } else { s += expf(v - m); }
      }
      float inv = 1.0f / s;
      for (int c = 0; c < channels; ++c) base[c * spatial] = expf((base[c * spatial] + bias[c]) * scale - m) * inv;
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void scale_softmax(torch::Tensor y, torch::Tensor bias, double scale) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)y.size(0), c = (int)y.size(1);
  long long spatial = y.numel() / ((long long)n * c);
  long long total = (long long)n * spatial;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 8192LL));
  bias_scale_softmax_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), n, c, spatial, (float)scale);
}
"""

_ext = load_inline(
    name="kbench_l2_19_convt3d_scale_softmax_cuda",
    cpp_sources="void scale_softmax(torch::Tensor y, torch::Tensor bias, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["scale_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, scale: float
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        _ext.scale_softmax(y, ct.bias, float(self.scale))
        return y
