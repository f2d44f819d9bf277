"""Row variance written as mean, subtract, square, mean: one kernel that loads each row once into registers
with float4 loads (32 floats a thread; a warp per row and 4 rows a block for rows up to 1024 floats, else a
block per row sized to it) and takes the mean, then the mean of squared deviations from those registers
(eager: mean + sub + pow + mean, four passes). Rows over 32768 floats take a looping block-per-row kernel."""

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

// Rows of up to VPT * 4 * blockDim.x floats, held in registers.
template <int VPT, bool VEC>
__global__ void row_variance_rows_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
  __shared__ float red[32];
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  int n = row < rows ? cols : 0;  // a padding row of the last block loads nothing but joins the barriers
  const float* xr = x + (long long)(row < rows ? row : 0) * cols;
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
  float mean = row_sum(s, red) / (float)cols;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) { float d = col<VEC>(k, j) < n ? v[k][j] - mean : 0.0f; q += d * d; }
  q = row_sum(q, red);
  if (threadIdx.x == 0 && row < rows) out[row] = q / (float)cols;
}

// Rows too long for registers: a block per row, mean and centered variance in two passes (re-reads hit L2).
__global__ void row_variance_long_kernel(const float* __restrict__ x, float* __restrict__ out, int cols) {
  __shared__ float red[32];
  const float* xr = x + (long long)blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  float mean = row_sum(s, red) / (float)cols;
  float q = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) { float d = xr[c] - mean; q += d * d; }
  q = row_sum(q, red);
  if (threadIdx.x == 0) out[blockIdx.x] = q / (float)cols;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <int VPT>
static void launch_rows(bool vec, dim3 grid, dim3 block, cudaStream_t st, const float* x, float* o, int rows, int cols) {
  if (vec) row_variance_rows_kernel<VPT, true><<<grid, block, 0, st>>>(x, o, rows, cols);
  else row_variance_rows_kernel<VPT, false><<<grid, block, 0, st>>>(x, o, rows, cols);
}

torch::Tensor row_variance(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int cols = (int)x.size(-1);
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  if (out.numel() == 0 || cols == 0) return out.fill_(NAN);  // mean over no columns, as eager
  int rows = (int)out.numel();
  auto st = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = cols % 4 == 0 && (reinterpret_cast<uintptr_t>(xp) & 15) == 0;
  if (cols <= 1024) {  // a warp per row, 4 rows a block, 4 to 32 floats a thread
    int vpt = cols <= 128 ? 1 : cols <= 256 ? 2 : cols <= 512 ? 4 : 8;
    dim3 block(32, 4), grid((rows + 3) / 4);
    if (vpt == 1) launch_rows<1>(vec, grid, block, st, xp, op, rows, cols);
    else if (vpt == 2) launch_rows<2>(vec, grid, block, st, xp, op, rows, cols);
    else if (vpt == 4) launch_rows<4>(vec, grid, block, st, xp, op, rows, cols);
    else launch_rows<8>(vec, grid, block, st, xp, op, rows, cols);
  } else if (cols <= 32768) {  // a block per row, 32 floats a thread
    int tx = ((cols + 31) / 32 + 31) / 32 * 32;
    launch_rows<8>(vec, dim3(rows), dim3(tx, 1), st, xp, op, rows, cols);
  } else {
    row_variance_long_kernel<<<rows, 1024, 0, st>>>(xp, op, cols);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_28_row_variance_cuda",
    cpp_sources="torch::Tensor row_variance(torch::Tensor x);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["row_variance"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_variance(x.contiguous())
