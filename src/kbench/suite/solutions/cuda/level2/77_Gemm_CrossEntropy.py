"""Linear classifier + per-sample cross-entropy: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate
tensor-core GEMM is what the Triton solution adds), and one kernel does the whole loss: a block per row
adds the bias, keeps per-thread online (max, rescaled sum of exp) pairs, merges them with warp shuffles
and shared memory, and writes logsumexp - logit[target] (eager: addmm, log_softmax reads the logits twice
and writes them again, nll_loss gathers).

Full preset: 4096 x 4096 x 4096: the 64 MB logits are written by cuBLAS and read once; the log-probability
tensor is never made. Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
struct MaxSum {
  float m, s;  // max, sum of exp(x - m); s == 0: empty
};

__device__ __forceinline__ void push(MaxSum& a, float x) {
  if (x > a.m) {
    a.s = (a.s > 0.0f ? a.s * expf(a.m - x) : 0.0f) + 1.0f;
    a.m = x;
  } else if (a.s > 0.0f) {
    a.s += expf(x - a.m);
  }
}

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  if (b.s == 0.0f) return a;
  if (a.s == 0.0f) return b;
  float m = fmaxf(a.m, b.m);
  return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum a) {
  for (int o = 16; o > 0; o >>= 1)
    a = merge(a, {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o)});
  return a;
}

__global__ void bias_cross_entropy_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                          const long long* __restrict__ targets, float* __restrict__ out, int n) {
  __shared__ MaxSum part[32];
  const float* row = y + (long long)blockIdx.x * n;
  MaxSum a = {-INFINITY, 0.0f};
  for (int c = threadIdx.x; c < n; c += blockDim.x) push(a, row[c] + bias[c]);
  a = warp_merge(a);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum b = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : MaxSum{-INFINITY, 0.0f};
    b = warp_merge(b);
    if (threadIdx.x == 0) {
      long long t = targets[blockIdx.x];
      out[blockIdx.x] = b.m + logf(b.s) - (row[t] + bias[t]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor targets, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  TORCH_CHECK(targets.is_contiguous() && targets.scalar_type() == torch::kInt64, "expected contiguous int64 targets");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  auto out = torch::empty({(long)m}, y.options());
  if (m == 0) return out;
  int threads = n >= 2048 ? 256 : 128;
  bias_cross_entropy_kernel<<<m, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), reinterpret_cast<const long long*>(targets.data_ptr<int64_t>()),
      out.data_ptr<float>(), n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_77_gemm_cross_entropy_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor targets, torch::Tensor weight, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, num_classes: int):
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)

    def forward(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), targets.contiguous(), self.linear.weight, self.linear.bias)
