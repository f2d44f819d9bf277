"""SwiGLU MLP: the three GEMMs stay in cuBLAS, and one vectorised kernel computes silu(gate) * up in place,
so the gated hidden activation is written once (eager: mm + mm + silu + mul + mm)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// V = 4 when both buffers are 16-byte aligned and the size is a multiple of 4.
template <int V>
__global__ void silu_mul_kernel(float* __restrict__ g, const float* __restrict__ u, long long total) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    if constexpr (V == 4) {
      float4 a = *reinterpret_cast<float4*>(g + i);
      float4 b = *reinterpret_cast<const float4*>(u + i);
      a.x = swiglu(a.x, b.x); a.y = swiglu(a.y, b.y); a.z = swiglu(a.z, b.z); a.w = swiglu(a.w, b.w);
      *reinterpret_cast<float4*>(g + i) = a;
    } else {
      g[i] = swiglu(g[i], u[i]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 4096LL)); }

void silu_mul(torch::Tensor g, torch::Tensor u) {
  TORCH_CHECK(g.is_cuda() && g.is_contiguous() && u.is_contiguous() && g.scalar_type() == torch::kFloat32, "expected contiguous float32 CUDA tensors");
  long long total = g.numel();
  float* gp = g.data_ptr<float>();
  const float* up = u.data_ptr<float>();
  auto stream = at::cuda::getCurrentCUDAStream();
  if (total % 4 == 0) {
    silu_mul_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(gp, up, total);
  } else {
    silu_mul_kernel<1><<<grid_for(total), 256, 0, stream>>>(gp, up, total);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_31_mlp_swiglu_cuda",
    cpp_sources="void silu_mul(torch::Tensor g, torch::Tensor u);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["silu_mul"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = torch.mm(x, self.gate.weight.t())
        u = torch.mm(x, self.up.weight.t())
        _ext.silu_mul(g, u)
        return torch.mm(g, self.down.weight.t())
