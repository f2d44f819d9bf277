"""MaxPool3d + ReLU + scale: one kernel, a thread per output voxel (coalesced along the output row), takes
the window max, applies ReLU and the scale (eager: max_pool3d + relu + mul, three passes)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__global__ void maxpool3d_relu_scale_kernel(const float* __restrict__ x, float* __restrict__ out, long long planes,
                                            int d, int h, int w, int k, float scale) {
  int od = d / k, oh = h / k, ow = w / k;
  long long total = planes * od * oh * ow;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    int xw = (int)(i % ow);
    long long t = i / ow;
    int xh = (int)(t % oh);
    t /= oh;
    int xd = (int)(t % od);
    long long p = t / od;
    const float* base = x + ((p * d + (long long)xd * k) * h + (long long)xh * k) * w + (long long)xw * k;
    float m = -INFINITY;
    for (int a = 0; a < k; ++a)
      for (int b = 0; b < k; ++b)
        for (int c = 0; c < k; ++c) m = fmaxf(m, base[((long long)a * h + b) * w + c]);
    out[i] = fmaxf(m, 0.0f) * scale;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor maxpool3d_relu_scale(torch::Tensor x, int64_t k, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int64_t n = x.size(0), c = x.size(1), d = x.size(2), h = x.size(3), w = x.size(4);
  auto out = torch::empty({n, c, d / k, h / k, w / k}, x.options());
  long long total = out.numel();
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  maxpool3d_relu_scale_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), out.data_ptr<float>(), n * c, (int)d, (int)h, (int)w, (int)k, (float)scale);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_34_maxpool3d_relu_scale_cuda",
    cpp_sources="torch::Tensor maxpool3d_relu_scale(torch::Tensor x, int64_t k, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["maxpool3d_relu_scale"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, kernel_size: int, scale: float):
        super().__init__()
        self.kernel_size = kernel_size
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.maxpool3d_relu_scale(x.contiguous(), int(self.kernel_size), float(self.scale))
