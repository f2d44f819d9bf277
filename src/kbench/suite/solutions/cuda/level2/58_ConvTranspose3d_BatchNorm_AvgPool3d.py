"""ConvTranspose3d + BatchNorm3d (training mode, batch statistics) + AvgPool3d: cuDNN transposed convolution
(it has no bias), then three kernels. BatchNorm is a per-channel affine map once its statistics are known, so
it commutes with average pooling:
1. statistics: a block per (sample, channel) volume sums it and its squares shifted by its first value (no
   cancellation; shared-memory trees, fixed order) into the volume's mean and centered M2;
2. finalize: a thread per channel merges its batch volumes (Chan's parallel formula, fixed order) into a_c =
   gamma_c * rstd_c and s_c = beta_c - mean_c * a_c, and updates the running statistics;
3. pool + affine: a thread per output averages its 2x2x2 window and writes mean * a_c + s_c.
At the full size the 537 MB conv output is read twice and only the 67 MB pooled output is written; eager runs
the statistics (read), the normalize (read + write) and the pooling (read + write).

The transposed convolution (29 GFLOP at the full size) stays in cuDNN, IEEE fp32 with TF32 off as the
reference runs it: it is most of the time at the full size, and beating it takes a 3xTF32 implicit-GEMM kernel
on the tensor cores that has to be tuned on the GPU; what follows it is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 2.4e-7."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256

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

// stats[2 * row] = mean, stats[2 * row + 1] = centered M2 of the row
__global__ void row_stats_kernel(const float* __restrict__ y, float* __restrict__ stats, int len) {
  __shared__ float smem[THREADS];
  long long row = blockIdx.x;
  const float* p = y + row * len;
  float shift = p[0];
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = threadIdx.x; i < len; i += THREADS) {
    float d = p[i] - shift;
    s1 += d;
    s2 += d * d;
  }
  float t1 = block_sum(s1, smem);
  float t2 = block_sum(s2, smem);
  if (threadIdx.x == 0) {
    stats[2 * row] = shift + t1 / len;
    stats[2 * row + 1] = fmaxf(t2 - t1 * t1 / len, 0.0f);
  }
}

// ss[c] = a_c, ss[channels + c] = s_c; rows of channel c are i * channels + c
__global__ void bn_finalize_kernel(const float* __restrict__ stats, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, float* __restrict__ running_mean,
                                   float* __restrict__ running_var, float* __restrict__ ss, int batch, int channels,
                                   int len, float eps, float momentum) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= channels) return;
  float mean = 0.0f;
  for (int i = 0; i < batch; ++i) mean += stats[2 * ((long long)i * channels + c)];
  mean /= batch;
  float m2 = 0.0f;
  for (int i = 0; i < batch; ++i) {
    long long r = (long long)i * channels + c;
    float d = stats[2 * r] - mean;
    m2 += stats[2 * r + 1] + (float)len * d * d;
  }
  float total = (float)batch * len;
  float a = gamma[c] * rsqrtf(m2 / total + eps);
  ss[c] = a;
  ss[channels + c] = beta[c] - mean * a;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean;
  running_var[c] = (1.0f - momentum) * running_var[c] + momentum * m2 / fmaxf(total - 1.0f, 1.0f);
}

// y: (planes, d, h, w), out: (planes, od, oh, ow); 64-bit indices.
__global__ void avgpool_affine_kernel(const float* __restrict__ y, const float* __restrict__ ss,
                                      float* __restrict__ out, long long planes, int channels, int d, int h, int w,
                                      int od, int oh, int ow) {
  long long npool = (long long)od * oh * ow;
  long long total = planes * npool;
  long long hw = (long long)h * w;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (long long)gridDim.x * blockDim.x) {
    long long plane = i / npool;
    int o = (int)(i % npool);
    int c = (int)(plane % channels);
    const float* src = y + plane * d * hw + (long long)(o / (oh * ow)) * 2 * hw + (long long)((o / ow) % oh) * 2 * w + (o % ow) * 2;
    float acc = 0.0f;
    for (int a = 0; a < 2; ++a)
      for (int j = 0; j < 2; ++j)
        for (int k = 0; k < 2; ++k) acc += src[a * hw + j * w + k];
    out[i] = acc * 0.125f * ss[c] + ss[channels + c];
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor batchnorm_avgpool(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean,
                                torch::Tensor running_var, double eps, double momentum) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int batch = (int)y.size(0), channels = (int)y.size(1), d = (int)y.size(2), h = (int)y.size(3), w = (int)y.size(4);
  long long rows = (long long)batch * channels;
  auto stats = torch::empty({rows * 2}, y.options());
  auto ss = torch::empty({2 * channels}, y.options());
  auto out = torch::empty({batch, channels, d / 2, h / 2, w / 2}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  int vol = d * h * w;
  row_stats_kernel<<<(unsigned)rows, 256, 0, stream>>>(y.data_ptr<float>(), stats.data_ptr<float>(), vol);
  bn_finalize_kernel<<<(channels + 127) / 128, 128, 0, stream>>>(
      stats.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), running_mean.data_ptr<float>(),
      running_var.data_ptr<float>(), ss.data_ptr<float>(), batch, channels, vol, (float)eps, (float)momentum);
  long long total = out.numel();
  int grid = (int)std::max(1LL, std::min((total + 255) / 256, 16384LL));
  avgpool_affine_kernel<<<grid, 256, 0, stream>>>(y.data_ptr<float>(), ss.data_ptr<float>(), out.data_ptr<float>(), rows,
                                                  channels, d, h, w, d / 2, h / 2, w / 2);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_58_convtranspose3d_batchnorm_avgpool3d_cuda",
    cpp_sources="torch::Tensor batchnorm_avgpool(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["batchnorm_avgpool"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
    ):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
            bias=False,
        )
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ct = self.conv_transpose
        y = F.conv_transpose3d(x, ct.weight, None, ct.stride, ct.padding, ct.output_padding).contiguous()
        bn = self.batch_norm
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            return _ext.batchnorm_avgpool(y, bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.eps, bn.momentum)
