"""Linear + sigmoid + cumulative sum over features: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate
tensor-core GEMM is what the Triton solution adds), and one kernel does the rest in place: a block per row
walks it in tiles of 4 x blockDim floats; each thread adds the bias, applies the sigmoid to 4 consecutive
values (one float4 when the width is a multiple of 4) and scans them, and the block scans the thread totals
with warp shuffles and one shared-memory step, adding the carry of the tiles before (eager: addmm, sigmoid
reads and writes the output, cumsum reads and writes it).

Full preset: 4096 x 4096 x 4096: the 64 MB GEMM output is read once and written once after cuBLAS.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// A block per row of the GEMM output y (bias not yet added). VEC: the row length is a multiple of 4 and
// the rows are 16-byte aligned.
template <bool VEC>
__global__ void bias_sigmoid_cumsum_kernel(float* __restrict__ y, const float* __restrict__ bias, int n) {
  __shared__ float warp_total[32];
  float* row = y + (long long)blockIdx.x * n;  // scanned in place
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float carry = 0.0f;  // sum of the tiles before; the same in every thread
  for (int base = 0; base < n; base += blockDim.x * 4) {
    int c = base + threadIdx.x * 4;
    float v[4];
    if (VEC && c < n) {
      float4 q = *reinterpret_cast<const float4*>(row + c);
      v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) v[j] = c + j < n ? row[c + j] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = c + j < n ? sigmoid(v[j] + bias[c + j]) : 0.0f;
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
      *reinterpret_cast<float4*>(row + c) = make_float4(v[0] + excl, v[1] + excl, v[2] + excl, v[3] + excl);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (c + j < n) row[c + j] = v[j] + excl;
    }
    carry += tile;
    __syncthreads();  // warp_total is rewritten by the next tile
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  if (m == 0 || n == 0) return y;
  float* yp = y.data_ptr<float>();
  bool vec = n % 4 == 0 && (reinterpret_cast<uintptr_t>(yp) & 15) == 0;
  auto st = at::cuda::getCurrentCUDAStream();
  if (vec) bias_sigmoid_cumsum_kernel<true><<<m, 256, 0, st>>>(yp, bias.data_ptr<float>(), n);
  else bias_sigmoid_cumsum_kernel<false><<<m, 256, 0, st>>>(yp, bias.data_ptr<float>(), n);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_87_gemm_sigmoid_cumsum_cuda",
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
