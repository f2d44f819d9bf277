"""Conv2d + min with a constant + bias + scale: cuDNN convolution without its bias, then one vectorised kernel
(float4 when the plane size allows) computes (min(y + b_c, constant) + bias_c) * scale in place (eager: conv +
bias, clamp, add, mul -> up to 8 passes over the 260 MB conv output at the full size; here one read and one
write).

The convolution (75 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 8.3e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// In place over an (N, C, *spatial) tensor; V = 4 when the spatial size is a multiple of 4, so a float4
// never straddles two channels. 64-bit indices: the tensor can exceed 2^31 elements.
template <int V>
__global__ void min_bias_scale_kernel(float* __restrict__ y, const float* __restrict__ conv_bias, const float* __restrict__ bias, float constant, float scale, long long total, int spatial, int channels) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)((i / spatial) % channels);
    float cb = conv_bias[c], b = bias[c];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = (fminf(v.x + cb, constant) + b) * scale; v.y = (fminf(v.y + cb, constant) + b) * scale; v.z = (fminf(v.z + cb, constant) + b) * scale; v.w = (fminf(v.w + cb, constant) + b) * scale;
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = (fminf(y[i] + cb, constant) + b) * scale;
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void epilogue(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double constant, double scale) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long total = y.numel();
  int channels = (int)y.size(1);
  int spatial = (int)(total / (y.size(0) * channels));
  auto stream = at::cuda::getCurrentCUDAStream();
  if (spatial % 4 == 0) {
    min_bias_scale_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), (float)constant, (float)scale, total, spatial, channels);
  } else {
    min_bias_scale_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), conv_bias.data_ptr<float>(), bias.data_ptr<float>(), (float)constant, (float)scale, total, spatial, channels);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_48_conv2d_min_biasadd_scale_cuda",
    cpp_sources="void epilogue(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor bias, double constant, double scale);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["epilogue"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        constant: float,
        scale: float,
        bias_shape: tuple[int, ...],
    ):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.constant = constant
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.epilogue(y, self.conv.bias, self.bias.reshape(-1).contiguous(), self.constant, self.scale)
        return y
