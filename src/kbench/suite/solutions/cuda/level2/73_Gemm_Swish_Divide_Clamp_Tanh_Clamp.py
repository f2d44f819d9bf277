"""Linear + Swish + halving + clamp + tanh + clamp: cuBLAS GEMM without its bias (torch.mm), then one
vectorised kernel (float4 when the row length allows) adds the bias and applies clamp(tanh(clamp(y *
sigmoid(y) / 2, -1, 1)), -0.5, 0.5) in place: the 67 MB GEMM output (full size) is read and written once,
where eager runs seven elementwise kernels over it (~14 passes).

The GEMM (69 GFLOP at the full size) stays in cuBLAS, IEEE fp32 with TF32 off as the reference runs it: a
faster one would be a 3xTF32 tensor-core GEMM (the Triton solution of this problem is one); hand-written wgmma
code for it is beyond this solution, so here the chain after the GEMM is what is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 6.0e-8."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ float chain(float y) {
  float t = fminf(fmaxf(y / (1.0f + expf(-y)) * 0.5f, -1.0f), 1.0f);
  return fminf(fmaxf(tanhf(t), -0.5f), 0.5f);
}

// In place over (rows, n); V = 4 when n is a multiple of 4, so a float4 never straddles two rows.
template <int V>
__global__ void bias_chain_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int j = (int)(i % n);
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = chain(v.x + bias[j]); v.y = chain(v.y + bias[j + 1]); v.z = chain(v.z + bias[j + 2]); v.w = chain(v.w + bias[j + 3]);
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = chain(y[i] + bias[j]);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void epilogue(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int n = (int)y.size(1);
  auto stream = at::cuda::getCurrentCUDAStream();
  if (n % 4 == 0) {
    bias_chain_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n);
  } else {
    bias_chain_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), total, n);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_73_gemm_swish_divide_clamp_tanh_clamp_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        _ext.epilogue(y, self.linear.bias)
        return y
