"""Linear + BatchNorm1d (training mode, batch statistics) + per-feature scale + softmax: cuBLAS GEMM (the
layer has no bias; torch.mm), then three kernels:
1. column statistics: a thread per (feature, chunk of 128 rows) walks its rows (neighbouring threads read
   neighbouring features, so loads are coalesced) and stores the chunk's mean and centered M2 (sums shifted by
   the chunk's first row, no cancellation);
2. finalize: a thread per feature merges its chunks (Chan's parallel formula, fixed order) into z = y * A_j +
   B_j, A_j = scale_j * gamma_j * rstd_j, B_j = scale_j * (beta_j - mean_j * gamma_j * rstd_j), and updates
   the running statistics;
3. a block per row applies the affine map with an online softmax (running max and rescaled sum per thread,
   merged by shared-memory trees in a fixed order) and writes the probabilities in place.
The 34 MB GEMM output (full size) is read twice and written once; eager runs mm, batch_norm (a statistics
read, a normalize read + write), mul (read + write) and softmax.

The GEMM (69 GFLOP at the full size) stays in cuBLAS, IEEE fp32 with TF32 off as the reference runs it: a
faster one would be a 3xTF32 tensor-core GEMM (the Triton solution of this problem is one, with the column
statistics in its epilogue); hand-written wgmma code for it is beyond this solution, so here the chain after
the GEMM is what is fused.
Max abs error vs the fp32 reference, small preset, seeds 3/1000/1001 (kernels and wrapper compiled as C++
behind a launch shim that runs each block's threads as host threads; nvcc compiles them for sm_90): 1.9e-7."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
#define THREADS 256
#define CHUNK 128

// part[2 * (chunk * n + j)] = mean, [.. + 1] = centered M2 of rows [chunk * CHUNK, ...) of column j
__global__ void column_stats_kernel(const float* __restrict__ y, float* __restrict__ part, int m, int n) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  int chunk = blockIdx.y;
  if (j >= n) return;
  int r0 = chunk * CHUNK;
  int r1 = r0 + CHUNK < m ? r0 + CHUNK : m;
  float shift = y[(long long)r0 * n + j];
  float s1 = 0.0f, s2 = 0.0f;
  for (int r = r0; r < r1; ++r) {
    float d = y[(long long)r * n + j] - shift;
    s1 += d;
    s2 += d * d;
  }
  float cnt = (float)(r1 - r0);
  part[2 * ((long long)chunk * n + j)] = shift + s1 / cnt;
  part[2 * ((long long)chunk * n + j) + 1] = fmaxf(s2 - s1 * s1 / cnt, 0.0f);
}

__global__ void bn_finalize_kernel(const float* __restrict__ part, const float* __restrict__ gamma,
                                   const float* __restrict__ beta, const float* __restrict__ scale,
                                   float* __restrict__ running_mean, float* __restrict__ running_var,
                                   float* __restrict__ ab, int m, int n, int chunks, float eps, float momentum) {
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= n) return;
  float mean = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    float cnt = (float)((k + 1) * CHUNK < m ? CHUNK : m - k * CHUNK);
    mean += cnt * part[2 * ((long long)k * n + j)];
  }
  mean /= m;
  float m2 = 0.0f;
  for (int k = 0; k < chunks; ++k) {
    float cnt = (float)((k + 1) * CHUNK < m ? CHUNK : m - k * CHUNK);
    float d = part[2 * ((long long)k * n + j)] - mean;
    m2 += part[2 * ((long long)k * n + j) + 1] + cnt * d * d;
  }
  float gr = gamma[j] * rsqrtf(m2 / m + eps);
  ab[j] = scale[j] * gr;
  ab[n + j] = scale[j] * (beta[j] - mean * gr);
  running_mean[j] = (1.0f - momentum) * running_mean[j] + momentum * mean;
  running_var[j] = (1.0f - momentum) * running_var[j] + momentum * m2 / fmaxf((float)m - 1.0f, 1.0f);
}

__global__ void affine_softmax_kernel(float* __restrict__ y, const float* __restrict__ ab, int n) {
  __shared__ float sm[THREADS];
  __shared__ float ss[THREADS];
  float* row = y + (long long)blockIdx.x * n;
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < n; j += THREADS) {
    float v = row[j] * ab[j] + ab[n + j];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  sm[threadIdx.x] = m;
  ss[threadIdx.x] = s;
  __syncthreads();
  for (int k = THREADS / 2; k > 0; k >>= 1) {
    if ((int)threadIdx.x < k) {
      float m1 = sm[threadIdx.x], m2 = sm[threadIdx.x + k];
      float mx = fmaxf(m1, m2);
      float s1 = m1 == -INFINITY ? 0.0f : ss[threadIdx.x] * expf(m1 - mx);
      float s2 = m2 == -INFINITY ? 0.0f : ss[threadIdx.x + k] * expf(m2 - mx);
      sm[threadIdx.x] = mx;
      ss[threadIdx.x] = s1 + s2;
    }
    __syncthreads();
  }
  float mx = sm[0], inv = 1.0f / ss[0];
  for (int j = threadIdx.x; j < n; j += THREADS) row[j] = expf(row[j] * ab[j] + ab[n + j] - mx) * inv;
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

void bn_scale_softmax(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor scale,
                      torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum) {
  TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  int m = (int)y.size(0), n = (int)y.size(1);
  int chunks = (m + 127) / 128;
  auto part = torch::empty({(long long)chunks * n * 2}, y.options());
  auto ab = torch::empty({2 * n}, y.options());
  auto stream = at::cuda::getCurrentCUDAStream();
  column_stats_kernel<<<dim3((n + 255) / 256, chunks), 256, 0, stream>>>(y.data_ptr<float>(), part.data_ptr<float>(), m, n);
  bn_finalize_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
      part.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), scale.data_ptr<float>(),
      running_mean.data_ptr<float>(), running_var.data_ptr<float>(), ab.data_ptr<float>(), m, n, chunks, (float)eps,
      (float)momentum);
  affine_softmax_kernel<<<(unsigned)m, 256, 0, stream>>>(y.data_ptr<float>(), ab.data_ptr<float>(), n);
}
"""

_ext = load_inline(
    name="kbench_l2_74_gemm_batchnorm_scale_softmax_cuda",
    cpp_sources="void bn_scale_softmax(torch::Tensor y, torch::Tensor gamma, torch::Tensor beta, torch::Tensor scale, torch::Tensor running_mean, torch::Tensor running_var, double eps, double momentum);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["bn_scale_softmax"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.batch_norm = nn.BatchNorm1d(out_features)
        self.scale = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.mm(x, self.linear.weight.t())
        bn = self.batch_norm
        with torch.no_grad():
            bn.num_batches_tracked.add_(1)
            _ext.bn_scale_softmax(y, bn.weight, bn.bias, self.scale, bn.running_mean, bn.running_var, bn.eps, bn.momentum)
        return y
