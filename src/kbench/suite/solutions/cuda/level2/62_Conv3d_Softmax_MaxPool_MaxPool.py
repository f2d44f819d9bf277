"""Conv3d + softmax over channels + MaxPool3d(2) + MaxPool3d(2): cuDNN convolution without its bias, then one
kernel. Two 2x2x2 max poolings in floor mode are one 4x4x4 max pooling (the second pool's window i covers
exactly the conv voxels 4i .. 4i+3 on every axis, and both drop the same trailing voxels), so a thread per
pooled voxel (grid-stride) walks the 64 taps of its window; at each tap it takes the softmax over the channels
(bias added on the fly: one pass for the max and rescaled sum, one re-read from L1 for the probabilities) and
keeps the per-channel running max in a shared-memory column. Only the pooled output (6.5 MB at the full size)
is written; the 472 MB conv output is read once from HBM (87 % of it: the windows skip the trailing voxels).
Eager adds the bias (read + write), runs softmax (read + write) and two poolings.

The convolution (51 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.2e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 128
#define MAX_CHANNELS 64  // the shared column: MAX_CHANNELS * THREADS floats (32 KB)

__global__ void softmax_maxpool4_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                        float* __restrict__ out, long long n, int channels, int d, int h, int w,
                                        int od, int oh, int ow) {
  __shared__ float best[MAX_CHANNELS * THREADS];
  long long npool = (long long)od * oh * ow;
  long long total = n * npool;
  long long hw = (long long)h * w, vol = d * hw;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < total; i += (long long)gridDim.x * THREADS) {
    long long s = i / npool;
    int o = (int)(i % npool);
    const float* corner = y + s * channels * vol + (long long)(o / (oh * ow)) * 4 * hw +
                          (long long)((o / ow) % oh) * 4 * w + (o % ow) * 4;
    for (int c = 0; c < channels; ++c) best[c * THREADS + threadIdx.x] = 0.0f;  // probabilities are > 0
    for (int t = 0; t < 64; ++t) {
      const float* v = corner + (t / 16) * hw + ((t / 4) % 4) * w + t % 4;
      float m = -INFINITY, sum = 0.0f;
      for (int c = 0; c < channels; ++c) {
        float a = v[(long long)c * vol] + bias[c];
        if (a > m) {
          sum = sum * expf(m - a) + 1.0f;
          m = a;
        } else {
          sum += expf(a - m);
        }
      }
      float inv = 1.0f / sum;
      for (int c = 0; c < channels; ++c) {
        float p = expf(v[(long long)c * vol] + bias[c] - m) * inv;
        best[c * THREADS + threadIdx.x] = fmaxf(best[c * THREADS + threadIdx.x], p);
      }
    }
    for (int c = 0; c < channels; ++c) out[(s * channels + c) * npool + o] = best[c * THREADS + threadIdx.x];
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor softmax_pool(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), d = (int)y.size(2), h = (int)y.size(3), w = (int)y.size(4);
  TORCH_CHECK(c <= 64, "at most 64 channels");
  int od = d / 2 / 2, oh = h / 2 / 2, ow = w / 2 / 2;
  auto out = torch::empty({n, c, od, oh, ow}, y.options());
  long long total = n * od * oh * ow;
  int grid = (int)std::max(1LL, std::min((total + 127) / 128, 16384LL));
  softmax_maxpool4_kernel<<<grid, 128, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, c, d, h, w, od, oh, ow);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_62_conv3d_softmax_maxpool_maxpool_cuda",
    cpp_sources="torch::Tensor softmax_pool(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["softmax_pool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv3d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.softmax_pool(y, self.conv.bias)
