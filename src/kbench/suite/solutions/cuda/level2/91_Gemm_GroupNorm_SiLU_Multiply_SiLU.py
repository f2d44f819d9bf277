"""Linear + GroupNorm + SiLU + multiplier + SiLU: the GEMM stays in cuBLAS (at::mm, fp32; the Triton solution
adds an fp32-accurate tensor-core GEMM with the whole GroupNorm in its epilogue), and one kernel does the
chain after it: a block per (row, group) holds the group's features in registers (float4 loads when the
group width is a multiple of 4), adds the bias, takes the mean and the centered variance with warp-shuffle
block reductions and writes silu(silu(n * gamma + beta) * multiplier) in place (eager: addmm, group_norm,
silu, mul, silu).

Full preset: 2048 x 4096 x 4096, 16 groups of 256: the 32 MB GEMM output is read once and written once
after cuBLAS. Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total. red holds
// 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call may still be reading red
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
  return t;
}

// Column of float j (0..3) of register slot k for the thread: VEC slots are the float4 number
// k * blockDim.x + threadIdx.x (row length a multiple of 4), scalar slots hold 4 floats blockDim.x apart.
// Both are coalesced.
template <bool VEC>
__device__ __forceinline__ int slot_col(int k, int j) {
  return VEC ? ((k * (int)blockDim.x + (int)threadIdx.x) << 2) + j : (k * 4 + j) * (int)blockDim.x + (int)threadIdx.x;
}

// Loads VPT slots of a row of n floats (zeros past its end).
template <int VPT, bool VEC>
__device__ __forceinline__ void load_row(const float* __restrict__ row, int n, float (&v)[VPT][4]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = slot_col<true>(k, 0);
      float4 q = c < n ? *reinterpret_cast<const float4*>(row + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[k][0] = q.x; v[k][1] = q.y; v[k][2] = q.z; v[k][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = slot_col<false>(k, j); v[k][j] = c < n ? row[c] : 0.0f; }
    }
  }
}

__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }

// Block (group g, row r): features [g * gs, (g + 1) * gs) of row r of the GEMM output y, in place.
template <int VPT, bool VEC>
__global__ void bias_groupnorm_silu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                           const float* __restrict__ gamma, const float* __restrict__ beta,
                                           const float* __restrict__ mult, int n, int gs, float eps) {
  __shared__ float red[32];
  int c0 = blockIdx.x * gs;
  float* grp = y + (long long)blockIdx.y * n + c0;
  float v[VPT][4];
  load_row<VPT, VEC>(grp, gs, v);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      v[k][j] = c < gs ? v[k][j] + bias[c0 + c] : 0.0f;
      s += v[k][j];
    }
  float mean = block_sum(s, red) / (float)gs;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float d = slot_col<VEC>(k, j) < gs ? v[k][j] - mean : 0.0f;
      q += d * d;
    }
  float rstd = rsqrtf(block_sum(q, red) / (float)gs + eps);
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < gs) {
        int f = c0 + c;
        grp[c] = silu(silu((v[k][j] - mean) * rstd * gamma[f] + beta[f]) * mult[f]);
      }
    }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// Threads for a row of n floats held as VPT slots of 4 floats a thread: a multiple of 32, at most 1024.
static int row_threads(int n, int vpt) { return std::min(1024, std::max(32, ((n + 4 * vpt - 1) / (4 * vpt) + 31) / 32 * 32)); }

// Smallest VPT in {1, 2, 4, 8} with at most 512 threads a row (rows up to 32768 floats).
static int row_vpt(int n) {
  TORCH_CHECK(n <= 32768, "rows longer than 32768 floats are not supported");
  for (int v = 1; v < 8; v *= 2) if (row_threads(n, v) <= 512) return v;
  return 8;
}

template <int VPT>
static void launch(bool vec, dim3 grid, int threads, cudaStream_t st, float* y, const float* b, const float* g,
                   const float* be, const float* mu, int n, int gs, float eps) {
  if (vec) bias_groupnorm_silu_kernel<VPT, true><<<grid, threads, 0, st>>>(y, b, g, be, mu, n, gs, eps);
  else bias_groupnorm_silu_kernel<VPT, false><<<grid, threads, 0, st>>>(y, b, g, be, mu, n, gs, eps);
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma,
                      torch::Tensor beta, torch::Tensor mult, int64_t groups, double eps) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  if (m == 0 || n == 0) return y;
  int gs = n / (int)groups;
  int vpt = row_vpt(gs), threads = row_threads(gs, vpt);
  float* yp = y.data_ptr<float>();
  bool vec = gs % 4 == 0 && n % 4 == 0 && aligned16(yp);
  dim3 grid((unsigned)groups, (unsigned)m);
  auto st = at::cuda::getCurrentCUDAStream();
  const float *bp = bias.data_ptr<float>(), *gp = gamma.data_ptr<float>(), *bep = beta.data_ptr<float>();
  const float* mp = mult.data_ptr<float>();
  if (vpt == 1) launch<1>(vec, grid, threads, st, yp, bp, gp, bep, mp, n, gs, (float)eps);
  else if (vpt == 2) launch<2>(vec, grid, threads, st, yp, bp, gp, bep, mp, n, gs, (float)eps);
  else if (vpt == 4) launch<4>(vec, grid, threads, st, yp, bp, gp, bep, mp, n, gs, (float)eps);
  else launch<8>(vec, grid, threads, st, yp, bp, gp, bep, mp, n, gs, (float)eps);
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_91_gemm_groupnorm_silu_multiply_silu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor gamma, torch::Tensor beta, torch::Tensor mult, int64_t groups, double eps);",
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
        self.multiplier = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gn = self.group_norm
        return _ext.forward(
            x.contiguous(), self.linear.weight, self.linear.bias, gn.weight, gn.bias, self.multiplier,
            gn.num_groups, gn.eps,
        )
