"""Maxout, linear to out_features * pieces then the max over each feature's pieces: the GEMM stays in cuBLAS
(at::mm, fp32; an fp32-accurate tensor-core GEMM is what the Triton solution adds), and one grid-stride
kernel reads each output feature's pieces, adds their biases and writes the maximum (eager: addmm, then
amax over a view).

Full preset: 4096 x 4096 x 4096 (1024 features x 4 pieces): the 64 MB GEMM output is read once, the 16 MB
result written once.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Grid-stride over the (rows, features) output; y is the GEMM output with pieces columns per feature, n = features.
template <int V>
__global__ void bias_maxout_kernel(const float* __restrict__ y, const float* __restrict__ bias, float* __restrict__ out, int pieces, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      long long e = i + j;
      if (e < total) {
        long long r = e / n;
        int c = (int)(e - r * n);
        const float* src = y + (r * n + c) * pieces;
        const float* bp = bias + (long long)c * pieces;
        float best = src[0] + bp[0];
        for (int p = 1; p < pieces; ++p) best = fmaxf(best, src[p] + bp[p]);
        out[e] = best;
      }
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t pieces) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int n = (int)(y.size(1) / pieces);
  auto out = torch::empty({y.size(0), (long)n}, y.options());
  long long total = out.numel();
  if (total == 0) return out;
  auto st = at::cuda::getCurrentCUDAStream();
  bias_maxout_kernel<4><<<grid_for(total / 4 + 1), 256, 0, st>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), (int)pieces, total, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_83_gemm_maxout_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, int64_t pieces);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, pieces: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features * pieces)
        self.pieces = pieces

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, self.pieces)
