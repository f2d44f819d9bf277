"""Softplus + row-wise cumulative sum in one kernel: a block per row walks it in tiles of 4 x blockDim
floats; each thread applies softplus (torch's formula: x above 20 passes through, else log1p(exp(x))) to 4
consecutive values (one float4 when the row length is a multiple of 4), scans them, and the block scans
the thread totals with warp shuffles and one shared-memory step, adding the carry of the tiles before
(eager: softplus writes the 16384 x 16384 tensor, cumsum reads it and writes: 2 reads + 2 writes of 1 GB).

Full preset: 16384 x 16384: 1 GB read once and written once, the minimum (~0.5 ms at 4.3 TB/s), a block
(256 threads, 1024-float tiles) per row. Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

// VEC: the row length is a multiple of 4 and the rows are 16-byte aligned.
template <bool VEC>
__global__ void softplus_cumsum_kernel(const float* __restrict__ x, float* __restrict__ out, int n) {
  __shared__ float warp_total[32];
  const float* xr = x + (long long)blockIdx.x * n;
  float* orow = out + (long long)blockIdx.x * n;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float carry = 0.0f;  // sum of the tiles before; the same in every thread
  for (int base = 0; base < n; base += blockDim.x * 4) {
    int c = base + threadIdx.x * 4;
    float v[4];
    if (VEC && c < n) {
      float4 q = *reinterpret_cast<const float4*>(xr + c);
      v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = c + j < n ? xr[c + j] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = c + j < n ? softplus(v[j]) : 0.0f;
    v[1] += v[0];
    v[2] += v[1];
    v[3] += v[2];
    float inc = v[3];  // inclusive scan of the thread totals over the warp
    for (int o = 1; o < 32; o <<= 1) {
      float up = __shfl_up_sync(0xffffffffu, inc, o);
      if (lane >= o) inc += up;
    }
    if (lane == 31) warp_total[warp] = inc;
    __syncthreads();
    float before = carry, tile = 0.0f;
    for (int w = 0; w < warps; ++w) {
      float t = warp_total[w];
      if (w < warp) before += t;
      tile += t;
    }
    float excl = before + inc - v[3];
    if (VEC && c < n) {
      *reinterpret_cast<float4*>(orow + c) = make_float4(v[0] + excl, v[1] + excl, v[2] + excl, v[3] + excl);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c + j < n) orow[c + j] = v[j] + excl;
    }
    carry += tile;
    __syncthreads();  // warp_total is rewritten by the next tile
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  auto out = torch::empty_like(x);
  int n = (int)x.size(-1);
  if (x.numel() == 0 || n == 0) return out;
  long long rows = x.numel() / n;
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(xp) & 15) == 0 && (reinterpret_cast<uintptr_t>(op) & 15) == 0;
  auto st = at::cuda::getCurrentCUDAStream();
  if (vec) softplus_cumsum_kernel<true><<<(unsigned)rows, 256, 0, st>>>(xp, op, n);
  else softplus_cumsum_kernel<false><<<(unsigned)rows, 256, 0, st>>>(xp, op, n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_110_softplus_cumsum_cuda",
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
