"""Causal attention: the two GEMMs stay in cuBLAS (torch.matmul), and one kernel (a block per query row)
fuses the 1/sqrt(d) scale, the causal mask (row i reads only keys 0..i; no mask tensor) and an online
softmax, writing zeros for the masked tail (eager: matmul + div + triu + masked_fill + softmax + matmul)."""

import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32); every thread gets the total. smem holds 32 floats.
__device__ float block_sum(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += smem[w];
  return t;
}

__device__ float block_max(float v, float* smem) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if ((threadIdx.x & 31) == 0) smem[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = -INFINITY;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t = fmaxf(t, smem[w]);
  return t;
}

__global__ void causal_softmax_kernel(const float* __restrict__ x, float* __restrict__ out, int seq, float scale) {
  __shared__ float smem[32];
  long long off = (long long)blockIdx.x * seq;
  int valid = blockIdx.x % seq + 1;  // query i attends to keys 0..i
  float m = -INFINITY, s = 0.0f;
  for (int c = threadIdx.x; c < valid; c += blockDim.x) {
    float v = x[off + c] * scale;
    if (v > m) { s = s * expf(m - v) + 1.0f; m = v; } else { s += expf(v - m); }
  }
  float mb = block_max(m, smem);
  float inv = 1.0f / block_sum(s > 0.0f ? s * expf(m - mb) : 0.0f, smem);
  for (int c = threadIdx.x; c < seq; c += blockDim.x)
    out[off + c] = c < valid ? expf(x[off + c] * scale - mb) * inv : 0.0f;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor causal_softmax(torch::Tensor x, double scale) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int seq = (int)x.size(-1);
  TORCH_CHECK(x.size(-2) == seq, "scores must be square in the last two dimensions");
  auto out = torch::empty_like(x);
  int rows = (int)(x.numel() / seq);
  causal_softmax_kernel<<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), out.data_ptr<float>(), seq, (float)scale);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_29_causal_attention_cuda",
    cpp_sources="torch::Tensor causal_softmax(torch::Tensor x, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["causal_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)).contiguous()
        weights = _ext.causal_softmax(scores, 1.0 / math.sqrt(q.shape[-1]))
        return torch.matmul(weights, v)
