"""Row variance (mean, subtract, square, mean) on CPU: one OpenMP task per block of rows, a centered
two-pass over each cache-resident row in double, instead of four full passes and two temporaries."""

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

torch::Tensor row_variance(torch::Tensor x) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CPU tensor");
  const int64_t n = x.size(-1), m = x.numel() / n;
  auto sizes = x.sizes().vec();
  sizes.pop_back();
  auto out = torch::empty(sizes, x.options());
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    double mean, var;
    row_stats(xp + r * n, n, mean, var);
    op[r] = (float)var;
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_28_row_variance_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["row_variance"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.row_variance(x.contiguous())
