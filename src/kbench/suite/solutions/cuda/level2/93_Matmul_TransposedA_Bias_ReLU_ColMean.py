"""a.T @ b + bias, ReLU, mean over rows: the GEMM stays in cuBLAS (at::mm on a's transposed view, fp32; the
Triton solution adds an fp32-accurate tensor-core GEMM that never writes the product), and one kernel does
the rest: a block owns 32 columns, its 32 warps take every 32nd row (each warp reads 32 consecutive floats a
row: coalesced), add the bias, apply ReLU and sum, and the 32 partial sums per column are combined in shared
memory in a fixed order (eager: the product written, add and relu each read and write it, mean reads it).

Full preset: 4096^3: the 64 MB product is read once after cuBLAS; 4096 floats are written.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// blockDim = (32, 32): column blockIdx.x * 32 + threadIdx.x, rows threadIdx.y, threadIdx.y + 32, ...
__global__ void bias_relu_colmean_kernel(const float* __restrict__ c, const float* __restrict__ bias,
                                         float* __restrict__ out, int m, int n) {
  __shared__ float part[32][33];
  int col = blockIdx.x * 32 + threadIdx.x;
  float s = 0.0f;
  if (col < n) {
    float b = bias[col];
    #pragma unroll 4
    for (int r = threadIdx.y; r < m; r += 32) s += fmaxf(c[(long long)r * n + col] + b, 0.0f);
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < n) {
    float t = 0.0f;
    for (int i = 0; i < 32; ++i) t += part[i][threadIdx.x];
    out[col] = t / (float)m;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias) {
  TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "expected float32 CUDA tensors");
  auto c = at::mm(a.t(), b).contiguous();
  int m = (int)c.size(0), n = (int)c.size(1);
  auto out = torch::empty({(long)n}, c.options());
  if (n == 0) return out;
  bias_relu_colmean_kernel<<<(n + 31) / 32, dim3(32, 32), 0, at::cuda::getCurrentCUDAStream()>>>(
      c.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), m, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_93_matmul_transposed_a_bias_relu_colmean_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor a, torch::Tensor b, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(n) * 0.02)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return _ext.forward(a.contiguous(), b.contiguous(), self.bias)
