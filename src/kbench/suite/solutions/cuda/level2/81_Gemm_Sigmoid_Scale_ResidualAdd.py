"""Linear + y + sigmoid(y) * scale: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate tensor-core GEMM is
what the Triton solution adds), and one grid-stride kernel adds the bias and applies y + sigmoid(y) * scale
in place, 4 consecutive elements a thread (eager: addmm, sigmoid, mul, add: three passes after the GEMM).

Full preset: 4096 x 2048 x 8192: the 128 MB GEMM output is read once and written once after cuBLAS.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Grid-stride over the GEMM output y (in place); n is the row length (the bias index is the column).
template <int V>
__global__ void bias_sigmoid_residual_kernel(float* __restrict__ y, const float* __restrict__ bias, float scale, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      long long e = i + j;
      if (e < total) {
        long long r = e / n;
        int c = (int)(e - r * n);
        float v = y[e] + bias[c];
        y[e] = v + scale / (1.0f + expf(-v));
      }
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  auto out = y;
  int n = (int)y.size(1);
  long long total = out.numel();
  if (total == 0) return out;
  auto st = at::cuda::getCurrentCUDAStream();
  bias_sigmoid_residual_kernel<4><<<grid_for(total / 4 + 1), 256, 0, st>>>(y.data_ptr<float>(), bias.data_ptr<float>(), (float)scale, total, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_81_gemm_sigmoid_scale_residual_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, float(self.scale))
