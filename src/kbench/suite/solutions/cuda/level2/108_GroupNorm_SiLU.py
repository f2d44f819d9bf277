"""GroupNorm + SiLU on NCHW in two kernels, the minimum when a group (8 channels x 128 x 128 = 512 KB)
cannot stay on chip: a statistics kernel reduces each (sample, group) span, contiguous in NCHW, to shifted
sums (of x - x0 and its square, x0 the span's first element, which keeps E[x^2] - E[x]^2 free of
cancellation even for a large mean), with float4 loads and warp-shuffle block reductions; an apply kernel
gives each (sample, channel) plane one scale and shift, rstd * gamma and beta - mean * rstd * gamma, and
writes silu(x * scale + shift). The apply pass walks the tensor backwards, so it starts on the planes the
statistics pass read last, still in L2 (eager: group_norm reads twice and writes, silu reads and writes).

Full preset: 48 x 256 x 128 x 128: 2 reads + 1 write of 805 MB (~0.55 ms at 4.3 TB/s) against eager's
3 + 2. Spans are split over several blocks when there are too few (sample, group) pairs to fill the GPU.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total. red holds
// 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // an earlier call may still be reading red
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float t = 0.0f;
  for (int w = 0; w < (int)(blockDim.x >> 5); ++w) t += red[w];
  return t;
}

// Block (span, piece) reduces elements [piece * chunk, min((piece + 1) * chunk, span)) of its span to
// sum(x - x0) and sum((x - x0)^2). VEC: span and chunk are multiples of 4 and x is 16-byte aligned.
template <bool VEC>
__global__ void group_stats_kernel(const float* __restrict__ x, float* __restrict__ part, long long span,
                                   long long chunk) {
  __shared__ float red[32];
  const float* base = x + (long long)blockIdx.x * span;
  float x0 = base[0];
  long long lo = (long long)blockIdx.y * chunk;
  long long hi = lo + chunk < span ? lo + chunk : span;
  float s1 = 0.0f, s2 = 0.0f;
  if (VEC) {
    const float4* b4 = reinterpret_cast<const float4*>(base);
    for (long long i = lo / 4 + threadIdx.x; i < hi / 4; i += blockDim.x) {
      float4 q = b4[i];
      float a = q.x - x0, b = q.y - x0, c = q.z - x0, d = q.w - x0;
      s1 += (a + b) + (c + d);
      s2 += (a * a + b * b) + (c * c + d * d);
    }
  } else {
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      float a = base[i] - x0;
      s1 += a;
      s2 += a * a;
    }
  }
  s1 = block_sum(s1, red);
  s2 = block_sum(s2, red);
  if (threadIdx.x == 0) {
    long long o = ((long long)blockIdx.x * gridDim.y + blockIdx.y) * 2;
    part[o] = s1;
    part[o + 1] = s2;
  }
}

// Block b (counted from the end) normalizes elements [c * per_block, ...) of plane p = (sample, channel).
template <bool VEC>
__global__ void group_apply_silu_kernel(const float* __restrict__ x, const float* __restrict__ part,
                                        const float* __restrict__ gamma, const float* __restrict__ beta,
                                        float* __restrict__ out, int channels, int cpg, int split, long long hw,
                                        long long span, int chunks, int per_block, float eps) {
  long long pid = (long long)gridDim.x - 1 - blockIdx.x;  // backwards: the last span read is still in L2
  long long plane = pid / chunks;
  int c = (int)(plane % channels);
  long long ng = (plane / channels) * (channels / cpg) + c / cpg;
  float s1 = 0.0f, s2 = 0.0f;
  for (int i = 0; i < split; ++i) {
    s1 += part[(ng * split + i) * 2];
    s2 += part[(ng * split + i) * 2 + 1];
  }
  float mean_s = s1 / (float)span;  // mean of x - x0
  float var = fmaxf(s2 / (float)span - mean_s * mean_s, 0.0f);
  float mean = mean_s + x[ng * span];
  float a = rsqrtf(var + eps) * gamma[c];
  float sh = beta[c] - mean * a;
  long long lo = (pid % chunks) * per_block;
  long long hi = lo + per_block < hw ? lo + per_block : hw;
  const float* xp = x + plane * hw;
  float* op = out + plane * hw;
  if (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(xp);
    float4* o4 = reinterpret_cast<float4*>(op);
    for (long long i = lo / 4 + threadIdx.x; i < hi / 4; i += blockDim.x) {
      float4 q = x4[i];
      float y0 = q.x * a + sh, y1 = q.y * a + sh, y2 = q.z * a + sh, y3 = q.w * a + sh;
      o4[i] = make_float4(y0 / (1.0f + expf(-y0)), y1 / (1.0f + expf(-y1)), y2 / (1.0f + expf(-y2)), y3 / (1.0f + expf(-y3)));
    }
  } else {
    for (long long i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      float y = xp[i] * a + sh;
      op[i] = y / (1.0f + expf(-y));
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

torch::Tensor forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CUDA tensor");
  auto out = torch::empty_like(x);
  long long n = x.size(0), channels = x.size(1);
  if (x.numel() == 0) return out;
  long long hw = x.numel() / (n * channels);
  int cpg = (int)(channels / groups);
  long long span = cpg * hw;
  long long pairs = n * groups;
  // split spans until there are ~1024 statistics blocks, each piece at least 16384 elements
  long long split = std::max(1LL, std::min((1024 + pairs - 1) / pairs, (span + 16383) / 16384));
  long long chunk = ((span + split - 1) / split + 3) / 4 * 4;
  split = (span + chunk - 1) / chunk;
  auto part = torch::empty({pairs, split, 2}, x.options());
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  bool aligned = (reinterpret_cast<uintptr_t>(xp) & 15) == 0 && (reinterpret_cast<uintptr_t>(op) & 15) == 0;
  auto st = at::cuda::getCurrentCUDAStream();
  dim3 sgrid((unsigned)pairs, (unsigned)split);
  if (aligned && span % 4 == 0) group_stats_kernel<true><<<sgrid, 512, 0, st>>>(xp, part.data_ptr<float>(), span, chunk);
  else group_stats_kernel<false><<<sgrid, 512, 0, st>>>(xp, part.data_ptr<float>(), span, chunk);
  int per_block = 4096;
  int chunks = (int)((hw + per_block - 1) / per_block);
  long long blocks = n * channels * chunks;
  if (aligned && hw % 4 == 0)
    group_apply_silu_kernel<true><<<(unsigned)blocks, 256, 0, st>>>(xp, part.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), op, (int)channels, cpg, (int)split, hw, span, chunks, per_block, (float)eps);
  else
    group_apply_silu_kernel<false><<<(unsigned)blocks, 256, 0, st>>>(xp, part.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(), op, (int)channels, cpg, (int)split, hw, span, chunks, per_block, (float)eps);
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_108_groupnorm_silu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, int64_t groups, double eps);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.group_norm = nn.GroupNorm(num_groups, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gn = self.group_norm
        return _ext.forward(x.contiguous(), gn.weight, gn.bias, gn.num_groups, gn.eps)
