"""ConvNeXt block: cuDNN depthwise 7x7 convolution (without its bias), cuBLAS for the two Linear layers, and
three kernels for everything between them:
1. bias + LayerNorm + permute: a block per 64 consecutive pixels; each thread reads its pixel's channels
   (coalesced across the block) into a shared-memory column, adds the conv bias, normalizes over the channels
   (mean, then centered variance, from the column), and the block writes the 64 channels-last rows of the
   LayerNorm output as one contiguous, coalesced stretch -- the permute costs nothing extra;
2. fc1 runs as cuBLAS addmm (bias in its epilogue), then GELU in place, vectorised (erf GELU, F.gelu's
   default);
3. fc2 runs as cuBLAS mm, then a block per 64 pixels loads its stretch of the fc2 output (coalesced) into
   shared memory and writes out = x + gamma * (z + b2) back in NCHW (coalesced along the pixels).
Eager also writes the conv bias add, the permuted copies, the LayerNorm output, the GELU output and the
product and sum with gamma and the residual as separate passes.

The GEMMs (69 GFLOP at the full size) stay in cuBLAS, IEEE fp32 with TF32 off as the reference runs them: a
faster path is a 3xTF32 tensor-core MLP that never writes the hidden activation (the Triton solution of this
problem is one); hand-written wgmma code for it is beyond this solution, so the glue around the GEMMs is what
is fused here.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 2.4e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define PIX 64
#define MAX_CHANNELS 128  // the shared tile: MAX_CHANNELS * PIX floats (32 KB)

// y: (N, C, hw) conv output without bias; t: (N * hw, C) LayerNorm output, channels last.
__global__ void bias_layernorm_permute_kernel(const float* __restrict__ y, const float* __restrict__ conv_bias,
                                              const float* __restrict__ ln_w, const float* __restrict__ ln_b,
                                              float* __restrict__ t, long long rows, int channels, int hw, float eps) {
  __shared__ float tile[MAX_CHANNELS * PIX];
  long long m0 = (long long)blockIdx.x * PIX;
  long long m = m0 + threadIdx.x;
  if (m < rows) {
    long long n = m / hw;
    int p = (int)(m % hw);
    const float* src = y + n * channels * hw + p;
    float sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float v = src[(long long)c * hw] + conv_bias[c];
      tile[c * PIX + threadIdx.x] = v;
      sum += v;
    }
    float mean = sum / channels;
    float var = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float d = tile[c * PIX + threadIdx.x] - mean;
      var += d * d;
    }
    float rstd = rsqrtf(var / channels + eps);
    for (int c = 0; c < channels; ++c)
      tile[c * PIX + threadIdx.x] = (tile[c * PIX + threadIdx.x] - mean) * rstd * ln_w[c] + ln_b[c];
  }
  __syncthreads();
  long long valid = rows - m0 < PIX ? rows - m0 : PIX;
  for (int e = threadIdx.x; e < valid * channels; e += PIX) {
    int pix = e / channels, c = e % channels;
    t[m0 * channels + e] = tile[c * PIX + pix];
  }
}

__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); }

// In place; V = 4 when the element count is a multiple of 4.
template <int V>
__global__ void gelu_kernel(float* __restrict__ h, long long total) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(h + i);
      v.x = gelu(v.x); v.y = gelu(v.y); v.z = gelu(v.z); v.w = gelu(v.w);
      *reinterpret_cast<float4*>(h + i) = v;
    } else {
      h[i] = gelu(h[i]);
    }
  }
}

// z: (N * hw, C) fc2 output without bias; out = x + gamma * (z + b2), NCHW.
__global__ void scale_residual_permute_kernel(const float* __restrict__ z, const float* __restrict__ b2,
                                              const float* __restrict__ gamma, const float* __restrict__ x,
                                              float* __restrict__ out, long long rows, int channels, int hw) {
  __shared__ float tile[MAX_CHANNELS * PIX];
  long long m0 = (long long)blockIdx.x * PIX;
  long long valid = rows - m0 < PIX ? rows - m0 : PIX;
  for (int e = threadIdx.x; e < valid * channels; e += PIX) {
    int pix = e / channels, c = e % channels;
    tile[c * PIX + pix] = z[m0 * channels + e];
  }
  __syncthreads();
  long long m = m0 + threadIdx.x;
  if (m < rows) {
    long long n = m / hw;
    int p = (int)(m % hw);
    long long base = n * channels * hw + p;
    for (int c = 0; c < channels; ++c) {
      long long i = base + (long long)c * hw;
      out[i] = x[i] + gamma[c] * (tile[c * PIX + threadIdx.x] + b2[c]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor layernorm_cl(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor ln_w, torch::Tensor ln_b, double eps) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  TORCH_CHECK(c <= 128, "at most 128 channels");
  long long rows = n * hw;
  auto t = torch::empty({rows, c}, y.options());
  bias_layernorm_permute_kernel<<<(unsigned)((rows + 63) / 64), 64, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), conv_bias.data_ptr<float>(), ln_w.data_ptr<float>(), ln_b.data_ptr<float>(), t.data_ptr<float>(),
      rows, c, hw, (float)eps);
  return t;
}

void gelu_inplace(torch::Tensor h) {
  TORCH_CHECK(h.is_cuda() && h.is_contiguous() && h.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = h.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  if (total % 4 == 0) {
    gelu_kernel<4><<<(int)std::max(1LL, std::min((total / 4 + 255) / 256, 8192LL)), 256, 0, stream>>>(h.data_ptr<float>(), total);
  } else {
    gelu_kernel<1><<<(int)std::max(1LL, std::min((total + 255) / 256, 8192LL)), 256, 0, stream>>>(h.data_ptr<float>(), total);
  }
}

torch::Tensor scale_residual(torch::Tensor z, torch::Tensor b2, torch::Tensor gamma, torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && z.is_contiguous(), "expected contiguous CUDA tensors");
  long long n = x.size(0);
  int c = (int)x.size(1), hw = (int)(x.size(2) * x.size(3));
  long long rows = n * hw;
  auto out = torch::empty_like(x);
  scale_residual_permute_kernel<<<(unsigned)((rows + 63) / 64), 64, 0, at::cuda::getCurrentCUDAStream()>>>(
      z.data_ptr<float>(), b2.data_ptr<float>(), gamma.data_ptr<float>(), x.data_ptr<float>(), out.data_ptr<float>(), rows, c, hw);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_46_convnext_block_cuda",
    cpp_sources=(
        "torch::Tensor layernorm_cl(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor ln_w, torch::Tensor ln_b, double eps);\n"
        "void gelu_inplace(torch::Tensor h);\n"
        "torch::Tensor scale_residual(torch::Tensor z, torch::Tensor b2, torch::Tensor gamma, torch::Tensor x);"
    ),
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["layernorm_cl", "gelu_inplace", "scale_residual"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        dw = self.dwconv
        y = F.conv2d(x, dw.weight, None, dw.stride, dw.padding, dw.dilation, dw.groups).contiguous()
        t = _ext.layernorm_cl(y, dw.bias, self.norm.weight, self.norm.bias, self.norm.eps)
        h = torch.addmm(self.fc1.bias, t, self.fc1.weight.t())
        _ext.gelu_inplace(h)
        z = torch.mm(h, self.fc2.weight.t())
        return _ext.scale_residual(z, self.fc2.bias, self.gamma, x)
