"""Linear + per-class scale + argmax: the GEMM stays in cuBLAS (at::mm, fp32; an fp32-accurate tensor-core
GEMM is what the Triton solution adds), and one kernel does the whole chain after it: a block per row adds
the bias, multiplies by the scale and reduces to the first index of the maximum with warp shuffles (value,
then lower index on ties, as torch.argmax), writing int64 (eager: addmm, mul writes the logits again,
argmax reads them).

Full preset: 4096 x 8192 x 1000: the 16 MB logits are written by cuBLAS and read once; the scaled copy is
never made. Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
__device__ __forceinline__ void better(float& v, int& i, float v2, int i2) {
  if (v2 > v || (v2 == v && i2 < i)) { v = v2; i = i2; }
}

__global__ void bias_scale_argmax_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                         const float* __restrict__ scale, long long* __restrict__ out, int n) {
  __shared__ float wv[32];
  __shared__ int wi[32];
  const float* row = y + (long long)blockIdx.x * n;
  float best = -INFINITY;
  int idx = n;  // no candidate yet
  for (int c = threadIdx.x; c < n; c += blockDim.x) better(best, idx, (row[c] + bias[c]) * scale[c], c);
  for (int o = 16; o > 0; o >>= 1) {
    float v2 = __shfl_xor_sync(0xffffffffu, best, o);
    int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    better(best, idx, v2, i2);
  }
  if ((threadIdx.x & 31) == 0) { wv[threadIdx.x >> 5] = best; wi[threadIdx.x >> 5] = idx; }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) better(best, idx, wv[w], wi[w]);
    out[blockIdx.x] = idx < n ? idx : 0;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto y = at::mm(x, weight.t());
  int m = (int)y.size(0), n = (int)y.size(1);
  auto out = torch::empty({(long)m}, x.options().dtype(torch::kInt64));
  if (m == 0) return out;
  int threads = n >= 1024 ? 256 : 128;
  bias_scale_argmax_kernel<<<m, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), scale.data_ptr<float>(),
      reinterpret_cast<long long*>(out.data_ptr<int64_t>()), n);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_76_gemm_scale_argmax_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, torch::Tensor scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, self.scale)
