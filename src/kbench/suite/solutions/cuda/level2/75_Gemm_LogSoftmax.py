"""Linear + log-softmax: cuBLAS GEMM without its bias (torch.mm), then one kernel, a block per row: a first
sweep adds the bias on the fly and keeps each thread's running max and rescaled sum (online logsumexp), merged
by shared-memory trees in a fixed order; a second sweep writes y + b - lse in place (the 32 KB row is re-read
from L2). The 134 MB logits (full size) are read twice and written once; eager runs addmm, then log_softmax's
passes.

The GEMM (137 GFLOP at the full size) stays in cuBLAS, IEEE fp32 with TF32 off as the reference runs it: a
faster one would be a 3xTF32 tensor-core GEMM (the Triton solution of this problem is one); hand-written wgmma
code for it is beyond this solution, so here the reduction after the GEMM is what is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 9.5e-7."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256

__global__ void bias_log_softmax_kernel(float* __restrict__ y, const float* __restrict__ bias, int n) {
  __shared__ float sm[THREADS];
  __shared__ float ss[THREADS];
  float* row = y + (long long)blockIdx.x * n;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < n; j += THREADS) {
    float v = row[j] + bias[j];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  sm[threadIdx.x] = m;
  ss[threadIdx.x] = s;
  __syncthreads();
  for (int k = THREADS / 2; k > 0; k >>= 1) {
    if ((int)threadIdx.x < k) {
      float m1 = sm[threadIdx.x], m2 = sm[threadIdx.x + k];
      float mx = fmaxf(m1, m2);
      float s1 = m1 == -INFINITY ? 0.0f : ss[threadIdx.x] * expf(m1 - mx);
      float s2 = m2 == -INFINITY ? 0.0f : ss[threadIdx.x + k] * expf(m2 - mx);
      sm[threadIdx.x] = mx;
      ss[threadIdx.x] = s1 + s2;
    }
    __syncthreads();
  }
  float lse = sm[0] + logf(ss[0]);
  for (int j = threadIdx.x; j < n; j += THREADS) row[j] = row[j] + bias[j] - lse;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void log_softmax_rows(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  bias_log_softmax_kernel<<<(unsigned)y.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), (int)y.size(1));
}
"""

_ext = load_inline(
    name="kbench_l2_75_gemm_logsoftmax_cuda",
    cpp_sources="void log_softmax_rows(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["log_softmax_rows"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        _ext.log_softmax_rows(y, self.linear.bias)
        return y
