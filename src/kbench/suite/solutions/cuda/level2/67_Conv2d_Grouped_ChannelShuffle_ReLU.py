"""Grouped Conv2d + channel shuffle + ReLU: cuDNN grouped convolution without its bias, then one vectorised
kernel (float4 when the plane size allows) writes each output plane straight from its source plane: output
channel j * groups + g is conv channel g * (C / groups) + j, so the shuffle is only an index map on whole
planes (contiguous reads and writes), with the bias and ReLU applied on the way. At the full size the 537 MB
conv output is read once and the output written once; eager adds the bias (read + write), materializes the
transposed view with a copy (read + write) and applies relu (read + write).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 0
(bit-identical)."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// out (N, C, hw) from y (N, C, hw): out channel oc = j * groups + g reads y channel g * (C / groups) + j.
// V = 4 when hw is a multiple of 4, so a float4 never straddles two planes. 64-bit indices.
template <int V>
__global__ void shuffle_bias_relu_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                         float* __restrict__ out, long long total, int hw, int channels, int groups) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  int cpg = channels / groups;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    long long oplane = i / hw;
    long long p = i % hw;
    int oc = (int)(oplane % channels);
    int src_c = (oc % groups) * cpg + oc / groups;
    long long src = (oplane - oc + src_c) * hw + p;
    float b = bias[src_c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<const float4*>(y + src);
      v.x = fmaxf(v.x + b, 0.0f); v.y = fmaxf(v.y + b, 0.0f); v.z = fmaxf(v.z + b, 0.0f); v.w = fmaxf(v.w + b, 0.0f);
      *reinterpret_cast<float4*>(out + i) = v;
    } else {
      out[i] = fmaxf(y[src] + b, 0.0f);
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

torch::Tensor shuffle_relu(torch::Tensor y, torch::Tensor bias, int64_t groups) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  auto out = torch::empty_like(y);
  long long total = y.numel();
  int channels = (int)y.size(1);
  int hw = (int)(y.size(2) * y.size(3));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (hw % 4 == 0) {
    shuffle_bias_relu_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, hw, channels, (int)groups);
  } else {
    shuffle_bias_relu_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), total, hw, channels, (int)groups);
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_67_conv2d_grouped_channelshuffle_relu_cuda",
    cpp_sources="torch::Tensor shuffle_relu(torch::Tensor y, torch::Tensor bias, int64_t groups);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["shuffle_relu"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, groups=groups)
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cv = self.conv
        y = F.conv2d(x, cv.weight, None, cv.stride, cv.padding, cv.dilation, cv.groups).contiguous()
        return _ext.shuffle_relu(y, cv.bias, self.groups)
