"""Conv2d + ELU + adaptive max pooling: cuDNN convolution without its bias, then one kernel: ELU is
increasing, so the max of elu(y + b) over a window is elu(max y + b). A block per (sample, channel) plane;
each output cell's adaptive window (rows floor(i H / O) .. ceil((i + 1) H / O), likewise columns) is reduced
by the block's threads (row-major, coalesced) through a shared-memory max tree, and one thread writes the
cell. At the full size the 268 MB conv output is read once and 1 MB written; eager adds the bias (read +
write), applies elu (read + write) and pools (read).

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
#define THREADS 256

// Max over the block (blockDim.x == THREADS, a power of two); every thread gets the result.
__device__ float block_max(float v, float* smem) {
  smem[threadIdx.x] = v;
  __syncthreads();
  for (int s = THREADS / 2; s > 0; s >>= 1) {
    if ((int)threadIdx.x < s) smem[threadIdx.x] = fmaxf(smem[threadIdx.x], smem[threadIdx.x + s]);
    __syncthreads();
  }
  float r = smem[0];
  __syncthreads();
  return r;
}

__global__ void elu_adaptive_maxpool_kernel(const float* __restrict__ y, const float* __restrict__ bias,
                                            float* __restrict__ out, int channels, int h, int w, int osize) {
  __shared__ float smem[THREADS];
  long long plane = blockIdx.x;
  const float* base = y + plane * h * w;
  float b = bias[plane % channels];
  for (int cell = 0; cell < osize * osize; ++cell) {
    int i = cell / osize, j = cell % osize;
    int h0 = (i * h) / osize, h1 = ((i + 1) * h + osize - 1) / osize;
    int w0 = (j * w) / osize, w1 = ((j + 1) * w + osize - 1) / osize;
    int ww = w1 - w0, count = (h1 - h0) * ww;
    float m = -INFINITY;
    for (int t = threadIdx.x; t < count; t += THREADS) m = fmaxf(m, base[(long long)(h0 + t / ww) * w + w0 + t % ww]);
    m = block_max(m, smem) + b;
    if (threadIdx.x == 0) out[plane * osize * osize + cell] = m > 0.0f ? m : expm1f(m);
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor elu_adaptive_maxpool(torch::Tensor y, torch::Tensor bias, int64_t osize) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  long long n = y.size(0), c = y.size(1);
  int h = (int)y.size(2), w = (int)y.size(3);
  auto out = torch::empty({n, c * osize * osize}, y.options());
  elu_adaptive_maxpool_kernel<<<(unsigned)(n * c), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), (int)c, h, w, (int)osize);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_72_conv2d_elu_adaptivemaxpool_cuda",
    cpp_sources="torch::Tensor elu_adaptive_maxpool(torch::Tensor y, torch::Tensor bias, int64_t osize);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["elu_adaptive_maxpool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, output_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.output_size = output_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.conv2d(x, self.conv.weight, None, self.conv.stride, self.conv.padding).contiguous()
        return _ext.elu_adaptive_maxpool(y, self.conv.bias, self.output_size)
