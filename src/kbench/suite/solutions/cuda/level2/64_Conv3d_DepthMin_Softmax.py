"""Conv3d + min over depth + softmax over channels: cuDNN convolution without its bias, then one kernel, a
thread per output pixel (grid-stride; neighbouring threads read neighbouring pixels, so loads are coalesced):
for each channel it walks the depth keeping the min, adds the bias after the min (a per-channel constant
commutes with it), parks the value in a shared-memory column and keeps a running max and rescaled sum (online
softmax); then it writes the channel probabilities from the column. At the full size the 346 MB conv output is
read once and the 16 MB output written; eager adds the bias (read + write), then amin (read) and softmax.

The convolution (75 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 4.5e-8."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 128
#define MAX_CHANNELS 64  // the shared column: MAX_CHANNELS * THREADS floats (32 KB)

__global__ void depthmin_softmax_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ out, long long n, int channels, int depth, int hw) {
  __shared__ float col[MAX_CHANNELS * THREADS];
  long long total = n * hw;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < total; i += (long long)gridDim.x * THREADS) {
    long long s = i / hw;
    int p = (int)(i % hw);
    float m = -INFINITY, sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      const float* src = y + (s * channels + c) * depth * hw + p;
      float v = INFINITY;
      for (int d = 0; d < depth; ++d) v = fminf(v, src[(long long)d * hw]);
      v += bias[c];
      col[c * THREADS + threadIdx.x] = v;
      if (v > m) {
        sum = sum * expf(m - v) + 1.0f;
        m = v;
      } else {
        sum += expf(v - m);
      }
    }
    float inv = 1.0f / sum;
    float* dst = out + s * channels * hw + p;
    for (int c = 0; c < channels; ++c) dst[(long long)c * hw] = expf(col[c * THREADS + threadIdx.x] - m) * inv;
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor depthmin_softmax(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), d = (int)y.size(2), h = (int)y.size(3), w = (int)y.size(4);
  TORCH_CHECK(c <= 64, "at most 64 channels");
  auto out = torch::empty({n, c, h, w}, y.options());
  long long total = n * h * w;
  int grid = (int)std::max(1LL, std::min((total + 127) / 128, 16384LL));
  depthmin_softmax_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, c, d, h * w);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_64_conv3d_depthmin_softmax_cuda",
    cpp_sources="torch::Tensor depthmin_softmax(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["depthmin_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.depthmin_softmax(y, self.conv.bias)
