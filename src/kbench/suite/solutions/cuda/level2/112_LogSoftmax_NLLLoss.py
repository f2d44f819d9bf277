"""Log-softmax + per-row NLL loss without materializing the log-probabilities: loss_i = logsumexp(x_i) -
x_i[t_i]. A block per row keeps per-thread online (max, rescaled sum of exp) pairs over float4 loads,
merges them with warp shuffles and shared memory, and one thread writes the row's loss (0 for a target
equal to ignore_index, -100, as F.nll_loss with reduction="none") (eager: log_softmax reads the
32768 x 8192 logits twice and writes them, nll_loss gathers).

Full preset: 32768 x 8192: 1 GB read once (~0.25 ms at 4.3 TB/s). Compile-checked for sm_90 (no GPU here
to run it).
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

// loss[row] = lse - x[t] (0 when ignored).
template <bool VEC>
__global__ void row_nll_kernel(const float* __restrict__ x, const long long* __restrict__ targets,
                               float* __restrict__ loss, int n, int ignore_index) {
  __shared__ MaxSum part[32];
  const float* xr = x + (long long)blockIdx.x * n;
  MaxSum a = {-INFINITY, 0.0f};
  if (VEC) {
    for (int i = threadIdx.x; i < n / 4; i += blockDim.x) {
      float4 q = reinterpret_cast<const float4*>(xr)[i];
      push(a, q.x); push(a, q.y); push(a, q.z); push(a, q.w);
    }
  } else {
    for (int i = threadIdx.x; i < n; i += blockDim.x) push(a, xr[i]);
  }
  a = warp_merge(a);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = a;
  __syncthreads();
  if (threadIdx.x < 32) {
    MaxSum b = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : MaxSum{-INFINITY, 0.0f};
    b = warp_merge(b);
    if (threadIdx.x == 0) {
      long long t = targets[blockIdx.x];
      bool counts = t != ignore_index;
      loss[blockIdx.x] = counts ? b.m + logf(b.s) - xr[t] : 0.0f;
    }
  }
}

"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor logits, torch::Tensor targets, int64_t ignore_index) {
  TORCH_CHECK(logits.is_cuda() && logits.is_contiguous() && logits.scalar_type() == torch::kFloat32, "expected contiguous float32 CUDA logits");
  TORCH_CHECK(targets.is_contiguous() && targets.scalar_type() == torch::kInt64, "expected contiguous int64 targets");
  int rows = (int)logits.size(0), n = (int)logits.size(1);
  auto loss = torch::empty({(long)rows}, logits.options());
  const float* xp = logits.data_ptr<float>();
  const long long* tp = reinterpret_cast<const long long*>(targets.data_ptr<int64_t>());
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(xp) & 15) == 0;
  int threads = n >= 4096 ? 512 : n >= 1024 ? 256 : 128;
  auto st = at::cuda::getCurrentCUDAStream();
  if (rows > 0) {
    if (vec) row_nll_kernel<true><<<rows, threads, 0, st>>>(xp, tp, loss.data_ptr<float>(), n, (int)ignore_index);
    else row_nll_kernel<false><<<rows, threads, 0, st>>>(xp, tp, loss.data_ptr<float>(), n, (int)ignore_index);
  }
  return loss;
}
"""

_ext = load_inline(
    name="kbench_l2_112_logsoftmax_nllloss_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor logits, torch::Tensor targets, int64_t ignore_index);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

IGNORE_INDEX = -100  # F.nll_loss's default


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.forward(logits.contiguous(), targets.contiguous(), IGNORE_INDEX)
