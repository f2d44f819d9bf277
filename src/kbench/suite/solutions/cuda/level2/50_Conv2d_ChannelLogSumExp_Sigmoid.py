"""Conv2d + logsumexp over channels + shift + sigmoid: cuDNN convolution without its bias, then one kernel (a
thread per output pixel, grid-stride; neighbouring threads read neighbouring pixels of each channel plane, so
every load is coalesced) adds the bias on the fly, keeps a running max and rescaled sum (online logsumexp, one
read of the conv output) and writes sigmoid(lse - shift). At the full size the 268 MB conv output is read once
and 2 MB written; eager adds the bias (a read and a write), then logsumexp's max, subtract, exp, sum and log
passes and two more elementwise kernels.

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 7.5e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__global__ void channel_lse_sigmoid_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                           float* __restrict__ out, long long n, int channels, int hw, float shift) {
  long long total = n * hw;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long s = i / hw;
    int p = (int)(i % hw);
    const float* base = y + s * channels * hw + p;
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float v = base[(long long)c * hw] + bias[c];
      if (v > m) {
        sum = sum * expf(m - v) + 1.0f;
        m = v;
      } else {
        sum += expf(v - m);
      }
    }
    float z = m + logf(sum) - shift;
    out[i] = 1.0f / (1.0f + expf(-z));
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor lse_sigmoid(torch::Tensor y, torch::Tensor bias, double shift) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::empty({n, 1, h, w}, y.options());
  long long total = n * h * w;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  channel_lse_sigmoid_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, c, h * w, (float)shift);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_50_conv2d_channel_logsumexp_sigmoid_cuda",
    cpp_sources="torch::Tensor lse_sigmoid(torch::Tensor y, torch::Tensor bias, double shift);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["lse_sigmoid"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, shift: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.shift = shift

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.lse_sigmoid(y, self.conv.bias, self.shift)
