"""Linear + tanh GELU on CPU: BLAS GEMM without its bias, then one OpenMP pass adds the bias and applies
GELU in place (eager: addmm + gelu)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

// Below ~64k elements OpenMP's fork/join (~5-20 us) costs more than the loop itself.
static constexpr int64_t kParallelMin = 1 << 16;

static inline float act(float v) {
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
  return 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
  TORCH_CHECK(!x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CPU tensor");
  auto y = at::mm(x, weight.t());  // GEMM stays in the BLAS; the epilogue below is one pass
  const int64_t m = y.size(0), n = y.size(1);
  float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    float* row = yp + r * n;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) row[c] = act(row[c] + bp[c]);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_2_gemm_gelu_tanh_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias)
