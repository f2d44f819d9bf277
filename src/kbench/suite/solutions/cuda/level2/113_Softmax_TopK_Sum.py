"""Softmax + top-k + sum, rewritten exactly: the top-k probabilities are exp(v_j - m) / S for the k largest
logits v_j, so only the row max m, S = sum exp(x - m) and the k largest logits are needed, all from one read
of the row. A block per row; each thread keeps an online (max, sum) pair and its own KMAX largest values
(a register list kept sorted by an unrolled insertion, KMAX >= k the next of 8/16/32), so the row's top k
are among the threads' lists; then k block-wide rounds take the largest list head (ties to the lower
thread) and pop it, which counts duplicated values as often as torch.topk does (eager: softmax reads the
32768 x 8192 input twice and writes it, topk reads it, sum).

Full preset: 32768 x 8192, k = 8: 1 GB read once (~0.25 ms at 4.3 TB/s); k <= 32. Compile-checked for
sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
template <int KMAX>
__global__ void softmax_topk_sum_kernel(const float* __restrict__ x, float* __restrict__ out, int n, int k) {
  __shared__ float wv[32], wm[32], ws[32];
  __shared__ int wi[32];
  const float* xr = x + (long long)blockIdx.x * n;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  float top[KMAX];  // this thread's largest values, descending
#pragma unroll
  for (int j = 0; j < KMAX; ++j) top[j] = -INFINITY;
  float m = -INFINITY, s = 0.0f;  // online max and sum of exp(x - m); s == 0: nothing yet
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    float v = xr[i];
    if (v > m) {
      s = (s > 0.0f ? s * expf(m - v) : 0.0f) + 1.0f;
      m = v;
    } else if (s > 0.0f) {
      s += expf(v - m);
    }
    if (v > top[KMAX - 1]) {
      top[KMAX - 1] = v;
#pragma unroll
      for (int j = KMAX - 1; j > 0; --j)
        if (top[j] > top[j - 1]) { float t = top[j]; top[j] = top[j - 1]; top[j - 1] = t; }
    }
  }
  // block max and sum
  for (int o = 16; o > 0; o >>= 1) {
    float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
    float mm = fmaxf(m, m2);
    s = (s > 0.0f ? s * expf(m - mm) : 0.0f) + (s2 > 0.0f ? s2 * expf(m2 - mm) : 0.0f);
    m = mm;
  }
  if (lane == 0) { wm[warp] = m; ws[warp] = s; }
  __syncthreads();
  float mx = -INFINITY;
  for (int w = 0; w < warps; ++w) mx = fmaxf(mx, wm[w]);
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += ws[w] > 0.0f ? ws[w] * expf(wm[w] - mx) : 0.0f;
  // k rounds: the largest list head in the block (lowest thread on ties) is taken and popped
  float mass = 0.0f;
  for (int r = 0; r < k; ++r) {
    float v = top[0];
    int who = threadIdx.x;
    for (int o = 16; o > 0; o >>= 1) {
      float v2 = __shfl_xor_sync(0xffffffffu, v, o);
      int w2 = __shfl_xor_sync(0xffffffffu, who, o);
      if (v2 > v || (v2 == v && w2 < who)) { v = v2; who = w2; }
    }
    __syncthreads();  // the previous round may still be reading wv / wi
    if (lane == 0) { wv[warp] = v; wi[warp] = who; }
    __syncthreads();
    v = wv[0];
    who = wi[0];
    for (int w = 1; w < warps; ++w)
      if (wv[w] > v || (wv[w] == v && wi[w] < who)) { v = wv[w]; who = wi[w]; }
    mass += expf(v - mx);
    if (threadIdx.x == who) {
#pragma unroll
      for (int j = 0; j < KMAX - 1; ++j) top[j] = top[j + 1];
      top[KMAX - 1] = -INFINITY;
    }
  }
  if (threadIdx.x == 0) out[blockIdx.x] = mass / total;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, int64_t k) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int n = (int)x.size(-1);
  TORCH_CHECK(k >= 1 && k <= n && k <= 32, "k must be in [1, min(32, row length)]");
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  if (x.numel() == 0) return out;
  long long rows = x.numel() / n;
  int threads = n >= 4096 ? 512 : n >= 1024 ? 256 : 128;
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  auto st = at::cuda::getCurrentCUDAStream();
  if (k <= 8) softmax_topk_sum_kernel<8><<<(unsigned)rows, threads, 0, st>>>(xp, op, n, (int)k);
  else if (k <= 16) softmax_topk_sum_kernel<16><<<(unsigned)rows, threads, 0, st>>>(xp, op, n, (int)k);
  else softmax_topk_sum_kernel<32><<<(unsigned)rows, threads, 0, st>>>(xp, op, n, (int)k);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_113_softmax_topk_sum_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, int64_t k);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, k: int):
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.k)
