"""Linear to twice the width + chunk + a * silu(b): the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate
tensor-core GEMM is what the Triton solution adds), and one grid-stride kernel reads both halves of each
row of the 2N-wide GEMM output, adds their biases and writes a * silu(b) to the N-wide result (eager:
addmm, chunk views, silu writes b's activation, mul reads both and writes).

Full preset: 4096 x 4096 x 4096: the 64 MB GEMM output is read once, the 32 MB result written once.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Grid-stride over the N-wide output; y is the 2N-wide GEMM output, n = N.
template <int V>
__global__ void bias_silu_gate_kernel(const float* __restrict__ y, const float* __restrict__ bias, float* __restrict__ out, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      long long e = i + j;
      if (e < total) {
        long long r = e / n;
        int c = (int)(e - r * n);
        float a = y[r * 2 * n + c] + bias[c];
        float b = y[r * 2 * n + n + c] + bias[n + c];
        out[e] = a * (b / (1.0f + expf(-b)));
      }
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int n = (int)(y.size(1) / 2);
  auto out = torch::empty({y.size(0), (long)n}, y.options());
  long long total = out.numel();
  if (total == 0) return out;
  auto st = at::cuda::getCurrentCUDAStream();
  bias_silu_gate_kernel<4><<<grid_for(total / 4 + 1), 256, 0, st>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_94_gemm_chunk_silugate_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias)
