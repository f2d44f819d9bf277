"""GELU MLP with residual: the two GEMMs stay in cuBLAS; one vectorised kernel adds fc1's bias and applies
erf GELU in place, a second adds fc2's bias and the residual in place (eager: addmm + gelu + addmm + add)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float gelu(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }

// In place: y = gelu(y + bias) (RESIDUAL false) or y = y + bias + r (RESIDUAL true). V = 4 when the row
// length is a multiple of 4 (a float4 never straddles two rows) and all buffers are 16-byte aligned.
template <int V, bool RESIDUAL>
__global__ void bias_epilogue_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                     const float* __restrict__ r, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % n);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      float4 b = *reinterpret_cast<const float4*>(bias + c);
      if constexpr (RESIDUAL) {
        float4 x = *reinterpret_cast<const float4*>(r + i);
        v.x += b.x + x.x; v.y += b.y + x.y; v.z += b.z + x.z; v.w += b.w + x.w;
      } else {
        v.x = gelu(v.x + b.x); v.y = gelu(v.y + b.y); v.z = gelu(v.z + b.z); v.w = gelu(v.w + b.w);
      }
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = RESIDUAL ? y[i] + bias[c] + r[i] : gelu(y[i] + bias[c]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

template <bool RESIDUAL>
static void launch(torch::Tensor y, torch::Tensor bias, const float* r) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int n = (int)y.size(-1);
  float* yp = y.data_ptr<float>();
  bool aligned = n % 4 == 0 && reinterpret_cast<uintptr_t>(r) % 16 == 0;
  auto stream = at::cuda::getCurrentCUDAStream();
  if (aligned) {
    bias_epilogue_kernel<4, RESIDUAL><<<grid_for(total / 4), 256, 0, stream>>>(yp, bias.data_ptr<float>(), r, total, n);
  } else {
    bias_epilogue_kernel<1, RESIDUAL><<<grid_for(total), 256, 0, stream>>>(yp, bias.data_ptr<float>(), r, total, n);
  }
}

void bias_gelu(torch::Tensor h, torch::Tensor bias) { launch<false>(h, bias, nullptr); }

void bias_residual(torch::Tensor y, torch::Tensor bias, torch::Tensor x) {
  TORCH_CHECK(x.is_contiguous() && x.numel() == y.numel(), "residual must be contiguous and shaped like the output");
  launch<true>(y, bias, x.data_ptr<float>());
}
"""

_ext = load_inline(
    name="kbench_l2_32_mlp_gelu_residual_cuda",
    cpp_sources="void bias_gelu(torch::Tensor h, torch::Tensor bias);\n"
    "void bias_residual(torch::Tensor y, torch::Tensor bias, torch::Tensor x);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["bias_gelu", "bias_residual"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        h = torch.mm(x, self.fc1.weight.t())
        _ext.bias_gelu(h, self.fc1.bias)
        y = torch.mm(h, self.fc2.weight.t())
        _ext.bias_residual(y, self.fc2.bias, x)
        return y
