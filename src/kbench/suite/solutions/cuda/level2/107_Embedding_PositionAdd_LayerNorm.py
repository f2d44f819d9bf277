"""Token embedding gather + position embedding + LayerNorm in one kernel: a block per token gathers its
embedding row and its position row into registers (float4 loads when the width is a multiple of 4), adds
them, takes the mean and the centered variance with warp-shuffle block reductions, and writes the affine
result once (eager: two embedding gathers, add, layer_norm: ~5 passes of 512 MB).

Full preset: 131072 tokens x 1024 (256 threads, one float4 each): 512 MB gathered (the 8 MB position table
stays in L2) and 512 MB written, the minimum (~0.25 ms at 4.3 TB/s). Compile-checked for sm_90 (no GPU here
to run it).
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

template <int VPT, bool VEC>
__global__ void embed_pos_layernorm_kernel(const long long* __restrict__ ids, const float* __restrict__ tok,
                                           const float* __restrict__ pos, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, float* __restrict__ out, int seq,
                                           int dim, float eps) {
  __shared__ float red[32];
  long long t = blockIdx.x;  // flat token index b * seq + s
  float v[VPT][4], p[VPT][4];
  load_row<VPT, VEC>(tok + ids[t] * dim, dim, v);
  load_row<VPT, VEC>(pos + (t % seq) * dim, dim, p);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) { v[k][j] += p[k][j]; s += v[k][j]; }
  float mean = block_sum(s, red) / (float)dim;
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float d = slot_col<VEC>(k, j) < dim ? v[k][j] - mean : 0.0f;
      q += d * d;
    }
  float rstd = rsqrtf(block_sum(q, red) / (float)dim + eps);
  float* o = out + t * dim;
#pragma unroll
  for (int k = 0; k < VPT; ++k)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int c = slot_col<VEC>(k, j);
      if (c < dim) o[c] = (v[k][j] - mean) * rstd * gamma[c] + beta[c];
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
static void launch(bool vec, int tokens, int threads, cudaStream_t st, const long long* ids, const float* tok,
                   const float* pos, const float* g, const float* b, float* o, int seq, int dim, float eps) {
  if (vec) embed_pos_layernorm_kernel<VPT, true><<<tokens, threads, 0, st>>>(ids, tok, pos, g, b, o, seq, dim, eps);
  else embed_pos_layernorm_kernel<VPT, false><<<tokens, threads, 0, st>>>(ids, tok, pos, g, b, o, seq, dim, eps);
}

torch::Tensor forward(torch::Tensor ids, torch::Tensor tok, torch::Tensor pos, torch::Tensor gamma,
                      torch::Tensor beta, double eps) {
  TORCH_CHECK(ids.is_cuda() && ids.is_contiguous() && ids.scalar_type() == torch::kInt64, "expected contiguous int64 CUDA ids");
  TORCH_CHECK(tok.is_contiguous() && pos.is_contiguous() && tok.scalar_type() == torch::kFloat32, "expected contiguous float32 tables");
  int seq = (int)ids.size(1), dim = (int)tok.size(1);
  int tokens = (int)ids.numel();
  auto out = torch::empty({ids.size(0), ids.size(1), (long)dim}, tok.options());
  if (tokens == 0) return out;
  int vpt = row_vpt(dim), threads = row_threads(dim, vpt);
  const float *tp = tok.data_ptr<float>(), *pp = pos.data_ptr<float>();
  const float *gp = gamma.data_ptr<float>(), *bp = beta.data_ptr<float>();
  const long long* ip = reinterpret_cast<const long long*>(ids.data_ptr<int64_t>());
  float* op = out.data_ptr<float>();
  bool vec = dim % 4 == 0 && aligned16(tp) && aligned16(pp) && aligned16(op);
  auto st = at::cuda::getCurrentCUDAStream();
  if (vpt == 1) launch<1>(vec, tokens, threads, st, ip, tp, pp, gp, bp, op, seq, dim, (float)eps);
  else if (vpt == 2) launch<2>(vec, tokens, threads, st, ip, tp, pp, gp, bp, op, seq, dim, (float)eps);
  else if (vpt == 4) launch<4>(vec, tokens, threads, st, ip, tp, pp, gp, bp, op, seq, dim, (float)eps);
  else launch<8>(vec, tokens, threads, st, ip, tp, pp, gp, bp, op, seq, dim, (float)eps);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_107_embedding_position_layernorm_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor ids, torch::Tensor tok, torch::Tensor pos, torch::Tensor gamma, torch::Tensor beta, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, vocab_size: int, seq_len: int, dim: int):
        super().__init__()
        self.token = nn.Embedding(vocab_size, dim)
        self.position = nn.Embedding(seq_len, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return _ext.forward(
            ids.contiguous(), self.token.weight, self.position.weight, self.norm.weight, self.norm.bias, self.norm.eps
        )
