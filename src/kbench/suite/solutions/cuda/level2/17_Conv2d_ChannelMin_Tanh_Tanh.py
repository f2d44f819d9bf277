"""Conv2d + min over channels + tanh + tanh: cuDNN convolution without its bias, then one kernel (a thread
per output pixel, coalesced across the row) adds the bias, takes the channel minimum and applies tanh twice
(eager: conv + bias + min + tanh + tanh)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__global__ void bias_channelmin_tanh2_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                             float* __restrict__ out, int n, int channels, int hw) {
  long long total = (long long)n * hw;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long s = i / hw, p = i % hw;
    const float* base = y + s * channels * hw + p;
    float m = INFINITY;
    for (int c = 0; c < channels; ++c) m = fminf(m, base[(long long)c * hw] + bias[c]);
    out[i] = tanhf(tanhf(m));
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor channelmin_tanh2(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)y.size(0), c = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::empty({n, 1, h, w}, y.options());
  long long total = (long long)n * h * w;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 8192LL));
  bias_channelmin_tanh2_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, c, h * w);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_17_conv2d_channelmin_tanh2_cuda",
    cpp_sources="torch::Tensor channelmin_tanh2(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["channelmin_tanh2"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.channelmin_tanh2(y, self.conv.bias)
