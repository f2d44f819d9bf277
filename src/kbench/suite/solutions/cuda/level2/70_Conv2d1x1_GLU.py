"""Pointwise Conv2d + GLU: the 1x1 convolution is a batched GEMM, W (2C x C) times each sample's C x HW input,
run by cuBLAS without its bias (torch.matmul broadcasts W over the batch); then one vectorised kernel (float4
when the plane size allows) writes (a + b_a) * sigmoid(g + b_g), pairing channel c with c + C. The 1.07 GB
pre-gate tensor (full size) is written by the GEMM and read once; eager's cuDNN convolution also adds its bias
in a pass of its own before glu reads it.

The GEMM (137 GFLOP at the full size) stays in cuBLAS, IEEE fp32 with TF32 off as the reference runs it: a
faster one would be a 3xTF32 tensor-core GEMM with the gate in its epilogue (the Triton solution of this
problem is one); hand-written wgmma code for it is beyond this solution, so here the gate is what is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 2.4e-7."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float gate(float a, float g) { return a / (1.0f + expf(-g)); }

// y: (N, 2C, hw) without bias, out: (N, C, hw); V = 4 when hw is a multiple of 4, so a float4 never straddles
// two planes. 64-bit indices.
template <int V>
__global__ void bias_glu_kernel(const float* __restrict__ y, const float* __restrict__ bias, float* __restrict__ out,
                                long long total, int channels, int hw) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    long long plane = i / hw;  // sample * channels + c
    long long p = i % hw;
    long long n = plane / channels;
    int c = (int)(plane % channels);
    const float* a = y + ((n * 2 * channels) + c) * hw + p;
    const float* g = a + (long long)channels * hw;
    float ba = bias[c], bg = bias[channels + c];
    if constexpr (V == 4) {
      float4 va = *reinterpret_cast<const float4*>(a);
      float4 vg = *reinterpret_cast<const float4*>(g);
      float4 r;
      r.x = gate(va.x + ba, vg.x + bg); r.y = gate(va.y + ba, vg.y + bg); r.z = gate(va.z + ba, vg.z + bg); r.w = gate(va.w + ba, vg.w + bg);
      *reinterpret_cast<float4*>(out + i) = r;
    } else {
      out[i] = gate(a[0] + ba, g[0] + bg);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor glu(torch::Tensor y, torch::Tensor bias, int64_t h, int64_t w) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int channels = (int)(y.size(1) / 2), hw = (int)(h * w);
  auto out = torch::empty({n, channels, h, w}, y.options());
  long long total = out.numel();
  auto stream = at::cuda::getCurrentCUDAStream();
  if (hw % 4 == 0) {
    bias_glu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, channels, hw);
  } else {
    bias_glu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, channels, hw);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_70_conv2d1x1_glu_cuda",
    cpp_sources="torch::Tensor glu(torch::Tensor y, torch::Tensor bias, int64_t h, int64_t w);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["glu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, 2 * channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        y = torch.matmul(self.conv.weight.view(2 * c, c), x.reshape(n, c, h * w)).contiguous()
        return _ext.glu(y, self.conv.bias, h, w)
