"""RMSNorm gated by SiLU(g): one kernel, a block per row: the mean square by warp shuffles, then
x * rsqrt(ms + eps) * w * silu(g) written in one pass (eager: pow + mean + add + rsqrt + mul + mul + silu
+ mul)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32); every thread gets the total. smem holds 32 floats.
__device__ float block_sum(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += smem[w];
  return t;
}

__global__ void rmsnorm_swiglu_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                      const float* __restrict__ w, float* __restrict__ out, int dim, float eps) {
  __shared__ float smem[32];
  long long off = (long long)blockIdx.x * dim;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) ss += x[off + c] * x[off + c];
  float r = rsqrtf(block_sum(ss, smem) / (float)dim + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    float gv = g[off + c];
    out[off + c] = x[off + c] * r * w[c] * (gv / (1.0f + expf(-gv)));
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor rmsnorm_swiglu(torch::Tensor x, torch::Tensor g, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && g.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32 CUDA tensors");
  auto out = torch::empty_like(x);
  int dim = (int)x.size(-1);
  int rows = (int)(x.numel() / dim);
  rmsnorm_swiglu_kernel<<<rows, 512, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), g.data_ptr<float>(), w.data_ptr<float>(), out.data_ptr<float>(), dim, (float)eps);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_26_rmsnorm_swiglu_cuda",
    cpp_sources="torch::Tensor rmsnorm_swiglu(torch::Tensor x, torch::Tensor g, torch::Tensor w, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["rmsnorm_swiglu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_swiglu(x.contiguous(), g.contiguous(), self.weight, float(self.eps))
