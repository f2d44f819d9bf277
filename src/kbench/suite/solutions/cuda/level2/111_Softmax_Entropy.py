"""Entropy of each row's softmax in one read of the input, rewritten exactly: with m the row max,
e_i = exp(x_i - m) and S = sum e_i, -sum p_i log p_i = log S - sum e_i (x_i - m) / S. A block per row; each
thread keeps an online (m, S, T = sum e_i (x_i - m)) over its elements (on a new max m', S and T are
rescaled by exp(m - m') and T also shifts by (m - m') S), float4 loads when the row length is a multiple
of 4, and the block merges the triples with warp shuffles and shared memory; one float per row is written
(eager: softmax and log_softmax each read the 16384 x 8192 input twice and write it, mul, sum).

Full preset: 16384 x 8192: 512 MB read once (~0.12 ms at 4.3 TB/s). Compile-checked for sm_90 (no GPU here
to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
struct Stat {
  float m, s, t;  // max, sum of exp(x - m), sum of exp(x - m) * (x - m)
};

__device__ __forceinline__ void push(Stat& a, float x) {
  if (x > a.m) {
    if (a.s > 0.0f) {
      float d = a.m - x, r = expf(d);
      a.t = r * (a.t + d * a.s);
      a.s *= r;
    }
    a.s += 1.0f;  // the new max contributes exp(0) = 1 and (x - m) = 0
    a.m = x;
  } else if (a.s > 0.0f) {
    float d = x - a.m, e = expf(d);
    a.s += e;
    a.t += e * d;
  }
}

__device__ __forceinline__ Stat merge(Stat a, Stat b) {
  if (b.s == 0.0f) return a;
  if (a.s == 0.0f) return b;
  float m = fmaxf(a.m, b.m), da = a.m - m, db = b.m - m, ra = expf(da), rb = expf(db);
  return {m, ra * a.s + rb * b.s, ra * (a.t + da * a.s) + rb * (b.t + db * b.s)};
}

__device__ __forceinline__ Stat warp_merge(Stat a) {
  for (int o = 16; o > 0; o >>= 1) {
    Stat b = {__shfl_xor_sync(0xffffffffu, a.m, o), __shfl_xor_sync(0xffffffffu, a.s, o),
              __shfl_xor_sync(0xffffffffu, a.t, o)};
    a = merge(a, b);
  }
  return a;
}

// VEC: the row length is a multiple of 4 and the rows are 16-byte aligned. blockDim.x: a multiple of 32.
template <bool VEC>
__global__ void softmax_entropy_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ Stat part[32];
  const float* xr = x + (long long)blockIdx.x * n;
  Stat a = {-INFINITY, 0.0f, 0.0f};
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
    Stat b = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : Stat{-INFINITY, 0.0f, 0.0f};
    b = warp_merge(b);
    if (threadIdx.x == 0) out[blockIdx.x] = logf(b.s) - b.t / b.s;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)x.size(-1);
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  if (x.numel() == 0) return out;
  long long rows = x.numel() / n;
  const float* xp = x.data_ptr<float>();
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(xp) & 15) == 0;
  int threads = n >= 4096 ? 512 : n >= 1024 ? 256 : 128;
  auto st = at::cuda::getCurrentCUDAStream();
  if (vec) softmax_entropy_kernel<true><<<(unsigned)rows, threads, 0, st>>>(xp, out.data_ptr<float>(), n);
  else softmax_entropy_kernel<false><<<(unsigned)rows, threads, 0, st>>>(xp, out.data_ptr<float>(), n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_111_softmax_entropy_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous())
