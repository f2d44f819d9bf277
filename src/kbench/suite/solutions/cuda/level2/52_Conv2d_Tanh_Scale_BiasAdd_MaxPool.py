"""Conv2d + tanh + scale + bias + MaxPool2d: cuDNN convolution without its bias, then one kernel (a thread per
pooled output, grid-stride) applies tanh(y + b_c) * scale + bias_c to every element of its window (so a
negative scale stays correct) and writes the window's max. At the full size the 268 MB conv output is read
once and 67 MB written; eager adds the conv bias, then runs tanh, mul, add (a read and a write of 268 MB each)
and max_pool2d (a read).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 4.8e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// y: (planes, h, w), out: (planes, oh, ow), plane = sample * channels + channel; 64-bit indices.
__global__ void tanh_scale_bias_maxpool_kernel(const float* __restrict__ y, const float* __restrict__ conv_bias,
                                               const float* __restrict__ bias, float* __restrict__ out,
                                               long long planes, int channels, int h, int w, int oh, int ow,
                                               int pool, float scale) {
  long long total = planes * oh * ow;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long plane = i / ((long long)oh * ow);
    int o = (int)(i % ((long long)oh * ow));
    int c = (int)(plane % channels);
    float cb = conv_bias[c], b = bias[c];
    const float* src = y + plane * h * w + (long long)(o / ow) * pool * w + (o % ow) * pool;
    float best = -INFINITY;
    for (int r = 0; r < pool; ++r)
      for (int q = 0; q < pool; ++q) best = fmaxf(best, tanhf(src[r * w + q] + cb) * scale + b);
    out[i] = best;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor tanh_scale_bias_maxpool(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale, int64_t pool) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int h = (int)y.size(2), w = (int)y.size(3), oh = h / (int)pool, ow = w / (int)pool;
  auto out = torch::empty({n, c, oh, ow}, y.options());
  long long total = n * c * oh * ow;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  tanh_scale_bias_maxpool_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n * c, (int)c,
      h, w, oh, ow, (int)pool, (float)scale);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_52_conv2d_tanh_scale_biasadd_maxpool_cuda",
    cpp_sources="torch::Tensor tanh_scale_bias_maxpool(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double scale, int64_t pool);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["tanh_scale_bias_maxpool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        scale: float,
        bias_shape: tuple[int, ...],
        pool_size: int,
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.tanh_scale_bias_maxpool(y, self.conv.bias, self.bias.reshape(-1).contiguous(), self.scale, self.pool_size)
