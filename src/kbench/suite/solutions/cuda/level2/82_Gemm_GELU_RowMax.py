"""Linear + GELU + row max: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate tensor-core GEMM is
what the Triton solution adds), and one kernel does the chain after it: a block per row adds the bias,
applies the exact (erf) GELU and reduces to the maximum with warp shuffles; the activation is never
written (eager: addmm, gelu reads and writes 4096 x 2048, amax reads it).

Full preset: 4096 x 4096 x 2048: the 32 MB GEMM output is written by cuBLAS and read once.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Max over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it. red: 32 floats.
__device__ __forceinline__ float block_max(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();  // an earlier call may still be reading red
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = fmaxf(t, red[w]);
  return t;
}

__global__ void bias_gelu_rowmax_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ out, int n) {
  __shared__ float red[32];
  const float* row = y + (long long)blockIdx.x * n;
  float best = -INFINITY;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    float v = row[c] + bias[c];
    best = fmaxf(best, 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)));
  }
  best = block_max(best, red);
  if (threadIdx.x == 0) out[blockIdx.x] = best;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  auto out = torch::empty({(long)m, 1}, y.options());
  if (m == 0) return out;
  bias_gelu_rowmax_kernel<<<m, n >= 1024 ? 256 : 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_82_gemm_gelu_rowmax_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias)
