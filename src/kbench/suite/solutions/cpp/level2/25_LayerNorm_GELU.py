"""LayerNorm + erf GELU on CPU: one OpenMP task per block of rows computes centered statistics and writes
the normalized, affine, GELU output in one more pass over the (cache-resident) row (eager: layer_norm +
gelu, two full passes)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

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
    for (int64_t c = 0; c < n; ++c) {
      float v = (xp[r * n + c] - mu) * rstd * g[c] + b[c];
      op[r * n + c] = 0.5f * v * (1.0f + std::erf(v * 0.7071067811865476f));
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_25_layernorm_gelu_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["layernorm_gelu"],
    extra_cflags=["-O3", "-fopenmp"],
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
