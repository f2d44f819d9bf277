"""LayerNorm + erf GELU: one kernel that keeps each row in registers (float4 loads, 32 floats a thread; a warp
per row and 4 rows a block for rows up to 1024 floats, else a block per row sized to it), so the row is read
once for the mean, the centered variance and the normalize + affine + GELU pass that writes (eager:
layer_norm + gelu, two full passes over memory). Rows over 32768 floats take a looping block-per-row kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the blockDim.x threads of one row (a multiple of 32; blockDim.y rows a block); every thread of
// the row gets the same total. red holds one float per warp of the block (at most 32).
__device__ __forceinline__ float row_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (blockDim.x == 32) return v;  // a warp per row: no shared memory, no barrier
  int wpr = blockDim.x >> 5, base = threadIdx.y * wpr;
  __syncthreads();  // the previous call may still be reading red
  if ((threadIdx.x & 31) == 0) red[base + (threadIdx.x >> 5)] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < wpr; ++w) t += red[base + w];
  return t;
}

// Column of element j of register slot k: VEC slots are float4s (slot k is float4 k * blockDim.x + tid);
// scalar slots hold 4 floats blockDim.x apart (coalesced scalar loads for dims not a multiple of 4).
template <bool VEC>
__device__ __forceinline__ int col(int k, int j) {
  return VEC ? ((k * (int)blockDim.x + (int)threadIdx.x) << 2) + j : (k * 4 + j) * (int)blockDim.x + (int)threadIdx.x;
}

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }

// Rows of up to VPT * 4 * blockDim.x floats, held in registers between the statistics and the write.
template <int VPT, bool VEC>
__global__ void layernorm_gelu_rows_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, float* __restrict__ out, int rows,
                                           int dim, float eps) {
  __shared__ float red[32];
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  int n = row < rows ? dim : 0;  // a padding row of the last block loads nothing but joins the barriers
  long long off = (long long)(row < rows ? row : 0) * dim;
  const float* xr = x + off;
  float v[VPT][4];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);
      float4 q = c < n ? *reinterpret_cast<const float4*>(xr + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[k][0] = q.x; v[k][1] = q.y; v[k][2] = q.z; v[k][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = col<false>(k, j); v[k][j] = c < n ? xr[c] : 0.0f; }
    }
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) s += v[k][j];
  float mean = row_sum(s, red) / (float)dim;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) { float d = col<VEC>(k, j) < n ? v[k][j] - mean : 0.0f; q += d * d; }
  float rstd = rsqrtf(row_sum(q, red) / (float)dim + eps);
  float* orow = out + off;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);
      if (c < n) {
        float4 g = *reinterpret_cast<const float4*>(gamma + c), b = *reinterpret_cast<const float4*>(beta + c);
        float4 o;
        o.x = gelu((v[k][0] - mean) * rstd * g.x + b.x);
        o.y = gelu((v[k][1] - mean) * rstd * g.y + b.y);
        o.z = gelu((v[k][2] - mean) * rstd * g.z + b.z);
        o.w = gelu((v[k][3] - mean) * rstd * g.w + b.w);
        *reinterpret_cast<float4*>(orow + c) = o;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int c = col<false>(k, j);
        if (c < n) orow[c] = gelu((v[k][j] - mean) * rstd * gamma[c] + beta[c]);
      }
    }
  }
}

// Rows too long for registers: a block per row, mean and centered variance in two passes (re-reads hit L2).
__global__ void layernorm_gelu_long_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, float* __restrict__ out, int dim,
                                           float eps) {
  __shared__ float red[32];
  const float* xr = x + (long long)blockIdx.x * dim;
  float* orow = out + (long long)blockIdx.x * dim;
  float s = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) s += xr[c];
  float mean = row_sum(s, red) / (float)dim;
  float q = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) { float d = xr[c] - mean; q += d * d; }
  float rstd = rsqrtf(row_sum(q, red) / (float)dim + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x) orow[c] = gelu((xr[c] - mean) * rstd * gamma[c] + beta[c]);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <int VPT>
static void launch_rows(bool vec, dim3 grid, dim3 block, cudaStream_t st, const float* x, const float* g,
                        const float* b, float* o, int rows, int dim, float eps) {
  if (vec) layernorm_gelu_rows_kernel<VPT, true><<<grid, block, 0, st>>>(x, g, b, o, rows, dim, eps);
  else layernorm_gelu_rows_kernel<VPT, false><<<grid, block, 0, st>>>(x, g, b, o, rows, dim, eps);
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

torch::Tensor layernorm_gelu(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  TORCH_CHECK(gamma.is_contiguous() && beta.is_contiguous(), "expected contiguous LayerNorm parameters");
  auto out = torch::empty_like(x);
  int dim = (int)x.size(-1);
  if (x.numel() == 0 || dim == 0) return out;
  int rows = (int)(x.numel() / dim);
  auto st = at::cuda::getCurrentCUDAStream();
  const float *xp = x.data_ptr<float>(), *gp = gamma.data_ptr<float>(), *bp = beta.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = dim % 4 == 0 && aligned16(xp) && aligned16(gp) && aligned16(bp) && aligned16(op);
  if (dim <= 1024) {  // a warp per row, 4 rows a block, 4 to 32 floats a thread
    int vpt = dim <= 128 ? 1 : dim <= 256 ? 2 : dim <= 512 ? 4 : 8;
    dim3 block(32, 4), grid((rows + 3) / 4);
    if (vpt == 1) launch_rows<1>(vec, grid, block, st, xp, gp, bp, op, rows, dim, (float)eps);
    else if (vpt == 2) launch_rows<2>(vec, grid, block, st, xp, gp, bp, op, rows, dim, (float)eps);
    else if (vpt == 4) launch_rows<4>(vec, grid, block, st, xp, gp, bp, op, rows, dim, (float)eps);
    else launch_rows<8>(vec, grid, block, st, xp, gp, bp, op, rows, dim, (float)eps);
  } else if (dim <= 32768) {  // a block per row, 32 floats a thread
    int tx = ((dim + 31) / 32 + 31) / 32 * 32;
    launch_rows<8>(vec, dim3(rows), dim3(tx, 1), st, xp, gp, bp, op, rows, dim, (float)eps);
  } else {
    layernorm_gelu_long_kernel<<<rows, 1024, 0, st>>>(xp, gp, bp, op, dim, (float)eps);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_25_layernorm_gelu_cuda",
    cpp_sources="torch::Tensor layernorm_gelu(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["layernorm_gelu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return _ext.layernorm_gelu(x.contiguous(), ln.weight, ln.bias, ln.eps)
