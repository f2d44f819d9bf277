"""ConvTranspose2d + softmax over channels + bias + scale + sigmoid: cuDNN transposed convolution without its
bias, then one kernel, a thread per pixel (grid-stride; neighbouring threads read neighbouring pixels of each
channel plane, so loads and stores are coalesced): the pixel's channel values (conv bias added) go to a
shared-memory column as they are read, with a running max and rescaled sum (online softmax), and are then
written as sigmoid((p + bias_c) * scale) in place from that column. At the full size the 537 MB conv output is
read once and written once; eager adds the conv bias (read + write), then softmax, add, mul and sigmoid (a
read and a write each): ~10 passes.

The transposed convolution (69 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 6.0e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 128
#define MAX_CHANNELS 64  // the shared column: MAX_CHANNELS * THREADS floats (32 KB)

__global__ void softmax_bias_scale_sigmoid_kernel(float* __restrict__ y, const float* __restrict__ conv_bias,
                                                  const float* __restrict__ bias, long long n, int channels, int hw,
                                                  float scale) {
  __shared__ float col[MAX_CHANNELS * THREADS];
  long long total = n * hw;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < total; i += (long long)gridDim.x * THREADS) {
    long long s = i / hw;
    int p = (int)(i % hw);
    float* base = y + s * channels * hw + p;
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float v = base[(long long)c * hw] + conv_bias[c];
      col[c * THREADS + threadIdx.x] = v;
      if (v > m) {
        sum = sum * expf(m - v) + 1.0f;
        m = v;
      } else {
        sum += expf(v - m);
      }
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < channels; ++c) {
      float z = (expf(col[c * THREADS + threadIdx.x] - m) * inv + bias[c]) * scale;
      base[(long long)c * hw] = 1.0f / (1.0f + expf(-z));
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void softmax_epilogue(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int c = (int)y.size(1);
  TORCH_CHECK(c <= 64, "at most 64 channels");
  long long n = y.size(0), hw = y.size(2) * y.size(3);
  long long total = n * hw;
  int grid = (int)std::max(1LL, std::min((total + 127) / 128, 16384LL));
  softmax_bias_scale_sigmoid_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), n, c, (int)hw, (float)scale);
}
"""

_ext = load_inline(
    name="kbench_l2_56_convtranspose2d_softmax_biasadd_scale_sigmoid_cuda",
    cpp_sources="void softmax_epilogue(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["softmax_epilogue"],
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
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose2d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        _ext.softmax_epilogue(y, ct.bias, self.bias.reshape(-1).contiguous(), self.scale)
        return y
