"""LayerNorm + erf GELU on CPU: one OpenMP task per block of rows computes centered statistics and writes
the normalized, affine, GELU output in one more pass over the (cache-resident) row (eager: layer_norm +
gelu, two full passes)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// Branch-free float math that the compiler vectorizes inside `omp simd` loops (libm's expf/tanhf/erff are
// scalar calls: ~8 ns per element, which made the fused loop slower than eager's SIMD kernels). Built with
// -fno-trapping-math, without which gcc 12 will not if-convert the selects below.
// vexp: e^x = 2^n * 2^f, n = round(x * log2 e), f in [-0.5, 0.5]; 2^f by its degree-7 Taylor polynomial
// (relative error < 1e-8 on that range); inputs clamped to the finite range of float.
static inline float vexp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);  // selects, not fmin/fmax: those block vectorizing
  const float t = x * 1.4426950408889634f;
  const float n = (float)(int32_t)(t + (t >= 0.0f ? 0.5f : -0.5f));  // round half away; SSE2 cvttps2dq
  const float f = t - n;
  float p = 1.525273380405984e-05f;
  p = p * f + 0.00015403530393381606f;
  p = p * f + 0.0013333558146428443f;
  p = p * f + 0.009618129107628477f;
  p = p * f + 0.05550410866482158f;
  p = p * f + 0.2402265069591007f;
  p = p * f + 0.6931471805599453f;
  p = p * f + 1.0f;
  const int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

// erf by Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7), odd-extended to negative x.
static inline float verf(float x) {
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const float r = 1.0f - p * t * vexp(-a * a);
  return x < 0.0f ? -r : r;
}

static constexpr int64_t kParallelMin = 1 << 16;  // below this, OpenMP fork/join costs more than the loop

// Centered two-pass mean and biased variance of one row, accumulated in double (the row stays in L1/L2).
static inline void row_stats(const float* row, int64_t n, double& mean, double& var) {
  double s = 0.0;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < n; ++c) s += row[c];
  mean = s / (double)n;
  double q = 0.0;
#pragma omp simd reduction(+ : q)
  for (int64_t c = 0; c < n; ++c) {
    double d = row[c] - mean;
    q += d * d;
  }
  var = q / (double)n;
}

torch::Tensor layernorm_gelu(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CPU tensor");
  auto out = torch::empty_like(x);
  const int64_t n = x.size(-1), m = x.numel() / n;
  const float* xp = x.data_ptr<float>();
  const float* g = gamma.data_ptr<float>();
  const float* b = beta.data_ptr<float>();
  float* op = out.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    double mean, var;
    row_stats(xp + r * n, n, mean, var);
    const float mu = (float)mean, rstd = (float)(1.0 / std::sqrt(var + eps));
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      float v = (xp[r * n + c] - mu) * rstd * g[c] + b[c];
      op[r * n + c] = 0.5f * v * (1.0f + verf(v * 0.7071067811865476f));
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_25_layernorm_gelu_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["layernorm_gelu"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(normalized_shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return _ext.layernorm_gelu(x.contiguous(), ln.weight, ln.bias, ln.eps)
