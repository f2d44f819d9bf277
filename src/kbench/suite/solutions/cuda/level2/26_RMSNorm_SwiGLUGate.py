"""RMSNorm gated by SiLU(g): one kernel that loads each row of x and g into registers with float4 loads (32
floats of each a thread; a warp per row and 4 rows a block for rows up to 1024 floats, else a block per row
sized to it), reduces the mean square while the gate loads are in flight, and writes
x * rsqrt(ms + eps) * w * silu(g): each byte read once (eager: pow + mean + add + rsqrt + mul + mul + silu
+ mul). Rows over 32768 floats take a looping block-per-row kernel."""

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

// VPT register slots of 4 floats of row p (n valid columns; the rest read as 0).
template <int VPT, bool VEC>
__device__ __forceinline__ void load_row(const float* __restrict__ p, int n, float (&v)[VPT][4]) {
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);
      float4 q = c < n ? *reinterpret_cast<const float4*>(p + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[k][0] = q.x; v[k][1] = q.y; v[k][2] = q.z; v[k][3] = q.w;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = col<false>(k, j); v[k][j] = c < n ? p[c] : 0.0f; }
    }
  }
}

__device__ __forceinline__ float gate(float xv, float r, float w, float g) { return xv * r * w * (g / (1.0f + expf(-g))); }

// Rows of up to VPT * 4 * blockDim.x floats, held in registers.
template <int VPT, bool VEC>
__global__ void rmsnorm_swiglu_rows_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                           const float* __restrict__ w, float* __restrict__ out, int rows,
                                           int dim, float eps) {
  __shared__ float red[32];
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  int n = row < rows ? dim : 0;  // a padding row of the last block loads nothing but joins the barriers
  long long off = (long long)(row < rows ? row : 0) * dim;
  float v[VPT][4], gv[VPT][4];
  load_row<VPT, VEC>(x + off, n, v);
  load_row<VPT, VEC>(g + off, n, gv);
  float ss = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) ss += v[k][j] * v[k][j];
  float r = rsqrtf(row_sum(ss, red) / (float)dim + eps);
  float* orow = out + off;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);
      if (c < n) {
        float4 wv = *reinterpret_cast<const float4*>(w + c), o;
        o.x = gate(v[k][0], r, wv.x, gv[k][0]);
        o.y = gate(v[k][1], r, wv.y, gv[k][1]);
        o.z = gate(v[k][2], r, wv.z, gv[k][2]);
        o.w = gate(v[k][3], r, wv.w, gv[k][3]);
        *reinterpret_cast<float4*>(orow + c) = o;
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int c = col<false>(k, j);
        if (c < n) orow[c] = gate(v[k][j], r, w[c], gv[k][j]);
      }
    }
  }
}

// Rows too long for registers: a block per row; the write pass re-reads x (from L2) and reads g.
__global__ void rmsnorm_swiglu_long_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                           const float* __restrict__ w, float* __restrict__ out, int dim, float eps) {
  __shared__ float red[32];
  long long off = (long long)blockIdx.x * dim;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) ss += x[off + c] * x[off + c];
  float r = rsqrtf(row_sum(ss, red) / (float)dim + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x) out[off + c] = gate(x[off + c], r, w[c], g[off + c]);
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <int VPT>
static void launch_rows(bool vec, dim3 grid, dim3 block, cudaStream_t st, const float* x, const float* g,
                        const float* w, float* o, int rows, int dim, float eps) {
  if (vec) rmsnorm_swiglu_rows_kernel<VPT, true><<<grid, block, 0, st>>>(x, g, w, o, rows, dim, eps);
  else rmsnorm_swiglu_rows_kernel<VPT, false><<<grid, block, 0, st>>>(x, g, w, o, rows, dim, eps);
}

static bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

torch::Tensor rmsnorm_swiglu(torch::Tensor x, torch::Tensor g, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && g.is_contiguous() && w.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32 CUDA tensors");
  TORCH_CHECK(g.sizes() == x.sizes(), "x and g must have the same shape");
  auto out = torch::empty_like(x);
  int dim = (int)x.size(-1);
  if (x.numel() == 0 || dim == 0) return out;
  int rows = (int)(x.numel() / dim);
  auto st = at::cuda::getCurrentCUDAStream();
  const float *xp = x.data_ptr<float>(), *gp = g.data_ptr<float>(), *wp = w.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = dim % 4 == 0 && aligned16(xp) && aligned16(gp) && aligned16(wp) && aligned16(op);
  if (dim <= 1024) {  // a warp per row, 4 rows a block, 4 to 32 floats a thread
    int vpt = dim <= 128 ? 1 : dim <= 256 ? 2 : dim <= 512 ? 4 : 8;
    dim3 block(32, 4), grid((rows + 3) / 4);
    if (vpt == 1) launch_rows<1>(vec, grid, block, st, xp, gp, wp, op, rows, dim, (float)eps);
    else if (vpt == 2) launch_rows<2>(vec, grid, block, st, xp, gp, wp, op, rows, dim, (float)eps);
    else if (vpt == 4) launch_rows<4>(vec, grid, block, st, xp, gp, wp, op, rows, dim, (float)eps);
    else launch_rows<8>(vec, grid, block, st, xp, gp, wp, op, rows, dim, (float)eps);
  } else if (dim <= 32768) {  // a block per row, 32 floats of x and of g a thread
    int tx = ((dim + 31) / 32 + 31) / 32 * 32;
    launch_rows<8>(vec, dim3(rows), dim3(tx, 1), st, xp, gp, wp, op, rows, dim, (float)eps);
  } else {
    rmsnorm_swiglu_long_kernel<<<rows, 1024, 0, st>>>(xp, gp, wp, op, dim, (float)eps);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_26_rmsnorm_swiglu_cuda",
    cpp_sources="torch::Tensor rmsnorm_swiglu(torch::Tensor x, torch::Tensor g, torch::Tensor w, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["rmsnorm_swiglu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return _ext.rmsnorm_swiglu(x.contiguous(), g.contiguous(), self.weight, float(self.eps))
