"""Conv2d + squeeze-and-excitation: cuDNN convolution without its bias, then three kernels:
1. squeeze: a block per (sample, channel) plane sums the conv output (shared-memory tree, fixed order; the
   conv bias is added to the mean, not to every element);
2. excite: a block per sample runs the gate MLP with both vectors in shared memory, g = sigmoid(W2 relu(W1 s +
   b1) + b2), and stores the pair (g_c, b_c g_c);
3. scale: y * g + b g in place, vectorised (float4 when the plane size allows).
The conv output (268 MB at the full size) is read twice and written once; eager also writes the bias add,
launches two tiny GEMMs and their activations and writes the product through broadcasting (~6 passes).

The convolution (77 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the reference runs it:
it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel on the tensor
cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 2.4e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256
#define MAX_CHANNELS 4096  // the squeezed and hidden vectors in shared memory (32 KB)

// Sum over the block (blockDim.x == THREADS, a power of two), fixed order; every thread gets the result.
__device__ float block_sum(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) smem[threadIdx.x] += smem[threadIdx.x + s];
    __syncthreads();
  }
  float r = smem[0];
  __syncthreads();
  return r;
}

__global__ void plane_sum_kernel(const float* __restrict__ y, float* __restrict__ sums, int hw) {
  __shared__ float smem[THREADS];
  const float* p = y + (long long)blockIdx.x * hw;
  float acc = 0.0f;
  for (int i = threadIdx.x; i < hw; i += THREADS) acc += p[i];
  float total = block_sum(acc, smem);
  if (threadIdx.x == 0) sums[blockIdx.x] = total;
}

__global__ void excite_kernel(const float* __restrict__ sums, const float* __restrict__ conv_bias,
                              const float* __restrict__ w1, const float* __restrict__ b1,
                              const float* __restrict__ w2, const float* __restrict__ b2,
                              float* __restrict__ gate, int channels, int hidden, float inv_hw) {
  __shared__ float sq[MAX_CHANNELS];
  __shared__ float hid[MAX_CHANNELS];
  int n = blockIdx.x;
  for (int c = threadIdx.x; c < channels; c += THREADS) sq[c] = sums[(long long)n * channels + c] * inv_hw + conv_bias[c];
  __syncthreads();
  for (int j = threadIdx.x; j < hidden; j += THREADS) {
    float acc = b1[j];
    for (int c = 0; c < channels; ++c) acc += w1[(long long)j * channels + c] * sq[c];
    hid[j] = fmaxf(acc, 0.0f);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < channels; c += THREADS) {
    float acc = b2[c];
    for (int j = 0; j < hidden; ++j) acc += w2[(long long)c * hidden + j] * hid[j];
    float g = 1.0f / (1.0f + expf(-acc));
    gate[((long long)n * channels + c) * 2] = g;
    gate[((long long)n * channels + c) * 2 + 1] = conv_bias[c] * g;
  }
}

// In place over (planes, hw); V = 4 when hw is a multiple of 4, so a float4 never straddles two planes.
template <int V>
__global__ void scale_kernel(float* __restrict__ y, const float* __restrict__ gate, long long total, int hw) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    long long plane = i / hw;
    float g = gate[plane * 2], b = gate[plane * 2 + 1];
    if constexpr (V == 4) {
      float4 v = *reinterpret_cast<float4*>(y + i);
      v.x = v.x * g + b; v.y = v.y * g + b; v.z = v.z * g + b; v.w = v.w * g + b;
      *reinterpret_cast<float4*>(y + i) = v;
    } else {
      y[i] = y[i] * g + b;
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

void squeeze_excite(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2,
                    torch::Tensor b2) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0);
  int c = (int)y.size(1), hw = (int)(y.size(2) * y.size(3));
  int hidden = (int)w1.size(0);
  TORCH_CHECK(c <= 4096 && hidden <= 4096, "at most 4096 channels");
  auto sums = torch::empty({n * c}, y.options());
  auto gate = torch::empty({n * c * 2}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  plane_sum_kernel<<<(unsigned)(n * c), 256, 0, stream>>>(y.data_ptr<float>(), sums.data_ptr<float>(), hw);
  excite_kernel<<<(unsigned)n, 256, 0, stream>>>(sums.data_ptr<float>(), conv_bias.data_ptr<float>(), w1.data_ptr<float>(),
                                                 b1.data_ptr<float>(), w2.data_ptr<float>(), b2.data_ptr<float>(),
                                                 gate.data_ptr<float>(), c, hidden, 1.0f / (float)hw);
  long long total = y.numel();
  if (hw % 4 == 0) {
    scale_kernel<4><<<grid_for(total / 4), 256, 0, stream>>>(y.data_ptr<float>(), gate.data_ptr<float>(), total, hw);
  } else {
    scale_kernel<1><<<grid_for(total), 256, 0, stream>>>(y.data_ptr<float>(), gate.data_ptr<float>(), total, hw);
  }
}
"""

_ext = load_inline(
    name="kbench_l2_47_conv2d_squeezeexcite_cuda",
    cpp_sources="void squeeze_excite(torch::Tensor y, torch::Tensor conv_bias, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["squeeze_excite"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, reduction: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.fc1 = nn.Linear(out_channels, out_channels // reduction)
        self.fc2 = nn.Linear(out_channels // reduction, out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        _ext.squeeze_excite(y, self.conv.bias, self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias)
        return y
