"""Linear + GroupNorm + HardTanh: cuBLAS GEMM without its bias, then one kernel (a block per row and group)
adds the bias, computes the group statistics with Welford, normalizes, applies the per-channel affine
transform and the clamp to [-2, 2] in place (eager: addmm + group_norm + hardtanh)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
struct Stats { float n, mean, m2; };

__device__ __forceinline__ Stats merge(Stats a, Stats b) {
  float n = a.n + b.n;
  if (n == 0.0f) return a;
  float d = b.mean - a.mean, f = b.n / n;
  return {n, a.mean + d * f, a.m2 + b.m2 + d * d * a.n * f};
}

__device__ Stats block_welford(Stats s, Stats* smem) {
  for (int o = 16; o > 0; o >>= 1) {
    Stats t{__shfl_xor_sync(0xffffffffu, s.n, o), __shfl_xor_sync(0xffffffffu, s.mean, o),
            __shfl_xor_sync(0xffffffffu, s.m2, o)};
    s = merge(s, t);
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = s;
  __syncthreads();
  Stats t{0.0f, 0.0f, 0.0f};
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = merge(t, smem[w]);
  return t;
}

// grid: (groups, rows); a group is `gs` contiguous channels of one row.
__global__ void bias_groupnorm_hardtanh_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                               const float* __restrict__ gamma, const float* __restrict__ beta,
                                               int n, int gs, float eps) {
  __shared__ Stats smem[32];
  int c0 = blockIdx.x * gs;
  float* g = y + (long long)blockIdx.y * n + c0;
  Stats s{0.0f, 0.0f, 0.0f};
  for (int j = threadIdx.x; j < gs; j += blockDim.x) {
    float v = g[j] + bias[c0 + j];
    s.n += 1.0f;
    float d = v - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (v - s.mean);
  }
  s = block_welford(s, smem);
  float rstd = rsqrtf(s.m2 / s.n + eps);
  for (int j = threadIdx.x; j < gs; j += blockDim.x) {
    int c = c0 + j;
    float v = (g[j] + bias[c] - s.mean) * rstd * gamma[c] + beta[c];
    g[j] = fminf(fmaxf(v, -2.0f), 2.0f);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma,
                      torch::Tensor beta, int64_t groups, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  int gs = n / (int)groups;
  int threads = gs >= 256 ? 256 : (gs >= 128 ? 128 : 64);
  dim3 grid((unsigned)groups, (unsigned)m);
  bias_groupnorm_hardtanh_kernel<<<grid, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), n, gs, (float)eps);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_9_gemm_groupnorm_hardtanh_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma, "
    "torch::Tensor beta, int64_t groups, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, num_groups: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.group_norm = nn.GroupNorm(num_groups, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.group_norm
        return _ext.forward(
            x.contiguous(), self.linear.weight, self.linear.bias, n.weight, n.bias, n.num_groups, n.eps
        )
