"""Conv2d + subtract the mean over channels + ReLU: cuDNN convolution without its bias, then one kernel, a
thread per pixel (grid-stride; neighbouring threads read neighbouring pixels of each channel plane, so loads
and stores are coalesced): the pixel's channel values (bias added) go to a shared-memory column as they are
summed, then relu(v - mean) is written in place from that column. At the full size the 268 MB conv output is
read once and written once; eager adds the bias (read + write), takes the mean (read), subtracts (two reads
and a write) and applies relu (read + write).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 3.6e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 64
#define MAX_CHANNELS 128  // the shared column: MAX_CHANNELS * THREADS floats (32 KB)

__global__ void bias_center_relu_kernel(float* __restrict__ y, const float* __restrict__ bias, long long n,
                                        int channels, int hw) {
  __shared__ float col[MAX_CHANNELS * THREADS];
  long long total = n * hw;
  for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < total; i += (long long)gridDim.x * THREADS) {
    long long s = i / hw;
    int p = (int)(i % hw);
    float* base = y + s * channels * hw + p;
    float sum = 0.0f;
    for (int c = 0; c < channels; ++c) {
      float v = base[(long long)c * hw] + bias[c];
      col[c * THREADS + threadIdx.x] = v;
      sum += v;
    }
    float mean = sum / channels;
    for (int c = 0; c < channels; ++c) base[(long long)c * hw] = fmaxf(col[c * THREADS + threadIdx.x] - mean, 0.0f);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void center_relu(torch::Tensor y, torch::Tensor bias) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int c = (int)y.size(1);
  TORCH_CHECK(c <= 128, "at most 128 channels");
  long long n = y.size(0), hw = y.size(2) * y.size(3);
  long long total = n * hw;
  int grid = (int)std::max(1LL, std::min((total + 63) / 64, 32768LL));
  bias_center_relu_kernel<<<grid, 64, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), n, c, (int)hw);
}
"""

_ext = load_inline(
    name="kbench_l2_69_conv2d_channelcenter_relu_cuda",
    cpp_sources="void center_relu(torch::Tensor y, torch::Tensor bias);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["center_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.center_relu(y, self.conv.bias)
        return y
