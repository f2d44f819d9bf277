# expect: cheat timing-output-inconsistent | cheat timing-output-mismatch | mismatch | cheat no-custom-kernel
# Memoises by data pointer: timed calls on reused input buffers skip the work.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Shared kernel library: every cuda fixture carries this exact text, so one cached build serves them all.
CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float v = x[i];
    y[i] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
  }
}

#define TILE 16
__global__ void linear_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ y,
                                        int64_t m, int64_t n, int64_t k) {
  __shared__ float xs[TILE][TILE];
  __shared__ float ws[TILE][TILE + 1];
  const int64_t row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < k; k0 += TILE) {
    xs[threadIdx.y][threadIdx.x] = (row < m && k0 + threadIdx.x < k) ? x[row * k + k0 + threadIdx.x] : 0.0f;
    const int64_t wrow = blockIdx.x * TILE + threadIdx.y;
    ws[threadIdx.y][threadIdx.x] = (wrow < n && k0 + threadIdx.x < k) ? w[wrow * k + k0 + threadIdx.x] : 0.0f;
    __syncthreads();
    for (int p = 0; p < TILE; ++p) acc += xs[threadIdx.y][p] * ws[threadIdx.x][p];
    __syncthreads();
  }
  if (row < m && col < n) y[row * n + col] = fmaxf(acc + b[col], 0.0f);
}

__global__ void conv2d_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                   const float* __restrict__ b, float* __restrict__ y, int64_t total,
                                   int c, int h, int wd, int co, int oh, int ow, int kh, int kw) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int cw = i % ow, r = (i / ow) % oh, o = (i / ((int64_t)ow * oh)) % co;
  const int64_t nb = i / ((int64_t)ow * oh * co);
  float acc = b[o];
  for (int ci = 0; ci < c; ++ci)
    for (int u = 0; u < kh; ++u)
      for (int v = 0; v < kw; ++v)
        acc += x[((nb * c + ci) * h + r + u) * wd + cw + v] * w[((o * c + ci) * kh + u) * kw + v];
  y[i] = fmaxf(acc, 0.0f);
}

__global__ void scribble_kernel(float* y, int64_t n) {
  const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i + (int64_t(1) << 40)] = 1.0f;  // 4 TiB past the buffer: an illegal address
}

static void check_fp32(const torch::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), "contiguous fp32 CUDA tensor expected");
}

torch::Tensor gelu_tanh(torch::Tensor x) {
  check_fp32(x);
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  const int blocks = (int)std::min<int64_t>((n + 255) / 256, 65535);
  gelu_tanh_kernel<<<blocks, 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_fp32(x); check_fp32(w); check_fp32(b);
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  auto y = torch::empty({m, n}, x.options());
  dim3 block(TILE, TILE), grid((n + TILE - 1) / TILE, (m + TILE - 1) / TILE);
  linear_bias_relu_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), m, n, k);
  return y;
}

torch::Tensor conv2d_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_fp32(x); check_fp32(w); check_fp32(b);
  const int c = x.size(1), h = x.size(2), wd = x.size(3), co = w.size(0), kh = w.size(2), kw = w.size(3);
  auto y = torch::empty({x.size(0), co, h - kh + 1, wd - kw + 1}, x.options());
  const int64_t total = y.numel();
  conv2d_relu_kernel<<<(total + 255) / 256, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), total,
      c, h, wd, co, h - kh + 1, wd - kw + 1, kh, kw);
  return y;
}

torch::Tensor uninit_like(torch::Tensor x) {
  return torch::empty_like(x);  // never written: whatever the caching allocator hands back
}

torch::Tensor scribble(torch::Tensor x) {
  auto y = torch::empty_like(x);
  scribble_kernel<<<1, 32, 0, at::cuda::getCurrentCUDAStream()>>>(y.data_ptr<float>(), 32);
  return y;
}
"""
CPP_DECLS = """
torch::Tensor gelu_tanh(torch::Tensor x);
torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);
torch::Tensor conv2d_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b);
torch::Tensor uninit_like(torch::Tensor x);
torch::Tensor scribble(torch::Tensor x);
"""
ext = load_inline(
    name="kbench_selftest_cuda",
    cpp_sources=CPP_DECLS,
    cuda_sources=CUDA_SOURCE,
    functions=["gelu_tanh", "linear_bias_relu", "conv2d_relu", "uninit_like", "scribble"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.memo = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.memo:
            self.memo[key] = ext.gelu_tanh(x)
        return self.memo[key]
