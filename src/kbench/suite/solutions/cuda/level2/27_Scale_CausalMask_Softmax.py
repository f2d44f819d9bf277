"""Scale + causal mask + softmax: one kernel that keeps each query row in registers (float4 loads, up to 32
floats a thread; a warp per row and 4 rows a block for rows up to 1024 keys, else a block per row sized to
it). Row i reads only its i + 1 unmasked scores (about half the input), takes max and sum of exps from the
registers and writes the whole row, zeros for the masked tail; no mask tensor is built (eager: triu + mul +
masked_fill + softmax). Rows over 32768 keys take a looping online-softmax kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum / max over the blockDim.x threads of one row (a multiple of 32; blockDim.y rows a block); every thread
// of the row gets the same result. red holds one float per warp of the block (at most 32).
template <bool MAX>
__device__ __forceinline__ float row_reduce(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    float t = __shfl_xor_sync(0xffffffffu, v, o);
    v = MAX ? fmaxf(v, t) : v + t;
  }
  if (blockDim.x == 32) return v;  // a warp per row: no shared memory, no barrier
  int wpr = blockDim.x >> 5, base = threadIdx.y * wpr;
  __syncthreads();  // the previous call may still be reading red
  if ((threadIdx.x & 31) == 0) red[base + (threadIdx.x >> 5)] = v;
  __syncthreads();
  float t = red[base];
  for (int w = 1; w < wpr; ++w) t = MAX ? fmaxf(t, red[base + w]) : t + red[base + w];
  return t;
}

// Column of element j of register slot k: VEC slots are float4s (slot k is float4 k * blockDim.x + tid);
// scalar slots hold 4 floats blockDim.x apart (coalesced scalar loads for lengths not a multiple of 4).
template <bool VEC>
__device__ __forceinline__ int col(int k, int j) {
  return VEC ? ((k * (int)blockDim.x + (int)threadIdx.x) << 2) + j : (k * 4 + j) * (int)blockDim.x + (int)threadIdx.x;
}

// Rows of up to VPT * 4 * blockDim.x keys, held in registers; masked keys hold -inf.
template <int VPT, bool VEC>
__global__ void causal_softmax_rows_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int seq,
                                           float scale) {
  __shared__ float red[32];
  int row = blockIdx.x * blockDim.y + threadIdx.y;
  int n = row < rows ? seq : 0;  // a padding row of the last block loads nothing but joins the barriers
  int valid = row < rows ? row % seq + 1 : 0;  // query i attends to keys 0..i
  long long off = (long long)(row < rows ? row : 0) * seq;
  const float* xr = x + off;
  float v[VPT][4];
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);  // seq % 4 == 0, so the whole float4 lies inside the row
      float4 q = c < valid ? *reinterpret_cast<const float4*>(xr + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      v[k][0] = c < valid ? q.x * scale : -INFINITY;
      v[k][1] = c + 1 < valid ? q.y * scale : -INFINITY;
      v[k][2] = c + 2 < valid ? q.z * scale : -INFINITY;
      v[k][3] = c + 3 < valid ? q.w * scale : -INFINITY;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = col<false>(k, j); v[k][j] = c < valid ? xr[c] * scale : -INFINITY; }
    }
  }
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) m = fmaxf(m, v[k][j]);
  m = row_reduce<true>(m, red);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) { v[k][j] = expf(v[k][j] - m); s += v[k][j]; }  // masked: exp(-inf) = 0
  float inv = 1.0f / row_reduce<false>(s, red);
  float* orow = out + off;
#pragma unroll
  for (int k = 0; k < VPT; ++k) {
    if (VEC) {
      int c = col<true>(k, 0);
      if (c < n) *reinterpret_cast<float4*>(orow + c) = make_float4(v[k][0] * inv, v[k][1] * inv, v[k][2] * inv, v[k][3] * inv);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) { int c = col<false>(k, j); if (c < n) orow[c] = v[k][j] * inv; }
    }
  }
}

// Rows too long for registers: a block per row, online softmax over the unmasked keys, then the write pass.
__global__ void causal_softmax_long_kernel(const float* __restrict__ x, float* __restrict__ out, int seq, float scale) {
  __shared__ float red[32];
  long long off = (long long)blockIdx.x * seq;
  int valid = blockIdx.x % seq + 1;
  float m = -INFINITY, s = 0.0f;
  for (int c = threadIdx.x; c < valid; c += blockDim.x) {
    float v = x[off + c] * scale;
    if (v > m) { s = s * expf(m - v) + 1.0f; m = v; } else { s += expf(v - m); }
  }
  float mb = row_reduce<true>(m, red);
  float inv = 1.0f / row_reduce<false>(s > 0.0f ? s * expf(m - mb) : 0.0f, red);
  for (int c = threadIdx.x; c < seq; c += blockDim.x)
    out[off + c] = c < valid ? expf(x[off + c] * scale - mb) * inv : 0.0f;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

template <int VPT>
static void launch_rows(bool vec, dim3 grid, dim3 block, cudaStream_t st, const float* x, float* o, int rows, int seq, float scale) {
  if (vec) causal_softmax_rows_kernel<VPT, true><<<grid, block, 0, st>>>(x, o, rows, seq, scale);
  else causal_softmax_rows_kernel<VPT, false><<<grid, block, 0, st>>>(x, o, rows, seq, scale);
}

torch::Tensor causal_softmax(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int seq = (int)x.size(-1);
  TORCH_CHECK(x.dim() >= 2 && x.size(-2) == seq, "scores must be square in the last two dimensions");
  auto out = torch::empty_like(x);
  if (x.numel() == 0) return out;
  int rows = (int)(x.numel() / seq);
  auto st = at::cuda::getCurrentCUDAStream();
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool vec = seq % 4 == 0 && (reinterpret_cast<uintptr_t>(xp) & 15) == 0 && (reinterpret_cast<uintptr_t>(op) & 15) == 0;
  float sc = (float)scale;
  if (seq <= 1024) {  // a warp per row, 4 rows a block, 4 to 32 keys a thread
    int vpt = seq <= 128 ? 1 : seq <= 256 ? 2 : seq <= 512 ? 4 : 8;
    dim3 block(32, 4), grid((rows + 3) / 4);
    if (vpt == 1) launch_rows<1>(vec, grid, block, st, xp, op, rows, seq, sc);
    else if (vpt == 2) launch_rows<2>(vec, grid, block, st, xp, op, rows, seq, sc);
    else if (vpt == 4) launch_rows<4>(vec, grid, block, st, xp, op, rows, seq, sc);
    else launch_rows<8>(vec, grid, block, st, xp, op, rows, seq, sc);
  } else if (seq <= 32768) {  // a block per row, 32 keys a thread
    int tx = ((seq + 31) / 32 + 31) / 32 * 32;
    launch_rows<8>(vec, dim3(rows), dim3(tx, 1), st, xp, op, rows, seq, sc);
  } else {
    causal_softmax_long_kernel<<<rows, 1024, 0, st>>>(xp, op, seq, sc);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_27_causal_softmax_cuda",
    cpp_sources="torch::Tensor causal_softmax(torch::Tensor x, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["causal_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, seq_len: int, scale: float):
        super().__init__()
        self.seq_len = seq_len
        self.scale = scale

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        return _ext.causal_softmax(scores.contiguous(), float(self.scale))
