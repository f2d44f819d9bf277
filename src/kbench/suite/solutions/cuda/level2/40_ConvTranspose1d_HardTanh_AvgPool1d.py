"""ConvTranspose1d + hardtanh + AvgPool1d: cuDNN transposed convolution without its bias, then one kernel (a
thread per pooled output, grid-stride) adds the per-channel bias, clamps every element of the window to [-0.5,
0.5] and writes the window's mean (eager: conv_transpose + bias, hardtanh, avg_pool1d -> 4 passes over the 268
MB conv output at the full size and a 134 MB write; here one read of it and the 134 MB write).

The transposed convolution (69 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 0."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// out: (rows, lout) with rows = N * C; y: (rows, length); 64-bit indices throughout.
__global__ void bias_hardtanh_avgpool_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                             float* __restrict__ out, long long rows, int length, int lout,
                                             int channels, int pool) {
  long long total = rows * lout;
  float inv = 1.0f / (float)pool;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long row = i / lout;
    int j = (int)(i % lout);
    float b = bias[row % channels];
    const float* src = y + row * length + (long long)j * pool;
    float acc = 0.0f;
    for (int t = 0; t < pool; ++t) acc += fminf(fmaxf(src[t] + b, -0.5f), 0.5f);
    out[i] = acc * inv;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor hardtanh_avgpool(torch::Tensor y, torch::Tensor bias, int64_t pool) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int length = (int)y.size(2), lout = length / (int)pool;
  auto out = torch::empty({n, c, lout}, y.options());
  long long total = n * c * lout;
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  bias_hardtanh_avgpool_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n * c, length, lout, (int)c, (int)pool);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_40_convtranspose1d_hardtanh_avgpool1d_cuda",
    cpp_sources="torch::Tensor hardtanh_avgpool(torch::Tensor y, torch::Tensor bias, int64_t pool);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["hardtanh_avgpool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self, in_channels: int, out_channels: int, kernel_size: int, stride: int, padding: int, pool_size: int
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose1d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding
        )
        self.pool_size = pool_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose1d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        return _ext.hardtanh_avgpool(y, ct.bias, self.pool_size)
