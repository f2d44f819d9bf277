"""ConvTranspose3d + LeakyReLU + per-channel multiplier + LeakyReLU + MaxPool3d: cuDNN transposed convolution
without its bias, then one kernel (a thread per pooled output, grid-stride) reads its 2x2x2 window, applies
leaky(leaky(y + b_c) * m_c) to every element (correct for any sign of the multiplier) and writes the window's
max. At the full size the 403 MB conv output is read once and 50 MB written; eager adds the bias, then runs
leaky_relu, mul and leaky_relu (a read and a write of 403 MB each) and the pooling (a read).

The transposed convolution (11 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 0
(bit-identical)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float leaky(float v) { return v >= 0.0f ? v : 0.2f * v; }

// y: (planes, d, h, w), out: (planes, od, oh, ow); 64-bit indices.
__global__ void leaky_mul_leaky_maxpool_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                               const float* __restrict__ mult, float* __restrict__ out,
                                               long long planes, int channels, int d, int h, int w,
                                               int od, int oh, int ow) {
  long long npool = (long long)od * oh * ow;
  long long total = planes * npool;
  long long hw = (long long)h * w;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long plane = i / npool;
    int o = (int)(i % npool);
    int c = (int)(plane % channels);
    float b = bias[c], m = mult[c];
    const float* src = y + plane * d * hw + (long long)(o / (oh * ow)) * 2 * hw + (long long)((o / ow) % oh) * 2 * w + (o % ow) * 2;
    float best = -INFINITY;
    for (int a = 0; a < 2; ++a)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 2; ++k) best = fmaxf(best, leaky(leaky(src[a * hw + j * w + k] + b) * m));
    out[i] = best;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor leaky_pool(torch::Tensor y, torch::Tensor bias, torch::Tensor mult) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int d = (int)y.size(2), h = (int)y.size(3), w = (int)y.size(4);
  auto out = torch::empty({n, c, d / 2, h / 2, w / 2}, y.options());
  long long total = out.numel();
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  leaky_mul_leaky_maxpool_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), mult.data_ptr<float>(), out.data_ptr<float>(), n * c, (int)c,
      d, h, w, d / 2, h / 2, w / 2);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_59_convtranspose3d_leaky_mul_leaky_maxpool_cuda",
    cpp_sources="torch::Tensor leaky_pool(torch::Tensor y, torch::Tensor bias, torch::Tensor mult);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["leaky_pool"],
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
        output_padding: int,
        multiplier_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        )
        self.multiplier = nn.Parameter(1.0 + torch.randn(multiplier_shape) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        return _ext.leaky_pool(y, ct.bias, self.multiplier.reshape(-1).contiguous())
