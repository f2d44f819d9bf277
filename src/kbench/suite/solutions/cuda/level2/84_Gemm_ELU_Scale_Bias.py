"""Linear + ELU + per-feature scale and bias: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate
tensor-core GEMM is what the Triton solution adds), and one grid-stride kernel adds the linear bias, applies
ELU (alpha 1, expm1 for small negatives) and the affine transform in place, 4 consecutive elements a thread
(eager: addmm, elu, mul, add: three passes after the GEMM).

Full preset: 4096 x 4096 x 4096: the 64 MB GEMM output is read once and written once after cuBLAS.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Grid-stride over the GEMM output y (in place); n is the row length (the parameter index is the column).
template <int V>
__global__ void bias_elu_affine_kernel(float* __restrict__ y, const float* __restrict__ bias, const float* __restrict__ scale, const float* __restrict__ shift, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      long long e = i + j;
      if (e < total) {
        long long r = e / n;
        int c = (int)(e - r * n);
        float v = y[e] + bias[c];
        y[e] = (v > 0.0f ? v : expm1f(v)) * scale[c] + shift[c];
      }
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale, torch::Tensor shift) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  auto out = y;
  int n = (int)y.size(1);
  long long total = out.numel();
  if (total == 0) return out;
  auto st = at::cuda::getCurrentCUDAStream();
  bias_elu_affine_kernel<4><<<grid_for(total / 4 + 1), 256, 0, st>>>(y.data_ptr<float>(), bias.data_ptr<float>(), scale.data_ptr<float>(), shift.data_ptr<float>(), total, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_84_gemm_elu_scale_bias_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale, torch::Tensor shift);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, self.scale, self.bias)
