"""Conv2d + pixel shuffle + ReLU: cuDNN convolution without its bias, then one kernel (a thread per output
element, grid-stride, so the writes are contiguous) gathers the shuffled output directly: output (c, r*h + i,
r*w + j) is conv channel c*r*r + i*r + j at (h, w); every conv value is read exactly once, with the bias and
ReLU applied on the way. At the full size the 268 MB conv output is read once and the output written once;
eager adds the bias (read + write), copies for pixel_shuffle (read + write) and applies relu (read + write).

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
// out (N, C / r^2, h * r, w * r) from y (N, C, h, w); 64-bit indices.
__global__ void pixel_shuffle_bias_relu_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                               float* __restrict__ out, long long total, int channels, int h, int w, int r) {
  int ow = w * r;
  long long oplane_size = (long long)h * r * ow;
  int oc_count = channels / (r * r);
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long oplane = i / oplane_size;
    long long q = i % oplane_size;
    int oy = (int)(q / ow), ox = (int)(q % ow);
    long long n = oplane / oc_count;
    int oc = (int)(oplane % oc_count);
    int src_c = oc * r * r + (oy % r) * r + ox % r;
    float v = y[((n * channels + src_c) * h + oy / r) * w + ox / r] + bias[src_c];
    out[i] = fmaxf(v, 0.0f);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor pixel_shuffle_relu(torch::Tensor y, torch::Tensor bias, int64_t r) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::empty({n, c / (r * r), h * r, w * r}, y.options());
  long long total = out.numel();
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  pixel_shuffle_bias_relu_kernel<<<grid, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, c, h, w, (int)r);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_71_conv2d_pixelshuffle_relu_cuda",
    cpp_sources="torch::Tensor pixel_shuffle_relu(torch::Tensor y, torch::Tensor bias, int64_t r);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["pixel_shuffle_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, upscale: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.upscale = upscale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.pixel_shuffle_relu(y, self.conv.bias, self.upscale)
