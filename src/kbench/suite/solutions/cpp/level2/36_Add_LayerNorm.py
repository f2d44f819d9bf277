"""Residual add + LayerNorm on CPU: one OpenMP task per block of rows writes x + residual once into the
output row, takes its centered statistics and normalizes it in place while it is cache-resident (eager:
add + layer_norm, with a full temporary)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

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

torch::Tensor add_layernorm(torch::Tensor x, torch::Tensor res, torch::Tensor gamma, torch::Tensor beta, double eps) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && res.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32 CPU tensors");
  auto out = torch::empty_like(x);
  const int64_t n = x.size(-1), m = x.numel() / n;
  const float* xp = x.data_ptr<float>();
  const float* rp = res.data_ptr<float>();
  const float* g = gamma.data_ptr<float>();
  const float* b = beta.data_ptr<float>();
  float* op = out.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    float* row = op + r * n;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) row[c] = xp[r * n + c] + rp[r * n + c];
    double mean, var;
    row_stats(row, n, mean, var);
    const float mu = (float)mean, rstd = (float)(1.0 / std::sqrt(var + eps));
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) row[c] = (row[c] - mu) * rstd * g[c] + b[c];
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_36_add_layernorm_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["add_layernorm"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return _ext.add_layernorm(x.contiguous(), residual.contiguous(), ln.weight, ln.bias, ln.eps)
