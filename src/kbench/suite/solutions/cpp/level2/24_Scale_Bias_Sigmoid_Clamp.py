"""Per-feature scale and bias, sigmoid, clamp on CPU: one OpenMP + SIMD pass instead of four (eager: mul +
add + sigmoid + clamp)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

static constexpr int64_t kParallelMin = 1 << 16;  // below this, OpenMP fork/join costs more than the loop

torch::Tensor scale_bias_sigmoid_clamp(torch::Tensor x, torch::Tensor scale, torch::Tensor bias) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CPU tensor");
  auto out = torch::empty_like(x);
  const int64_t n = x.size(-1), m = x.numel() / n;
  const float* xp = x.data_ptr<float>();
  const float* sp = scale.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
  float* op = out.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) {
      float s = 1.0f / (1.0f + std::exp(-(xp[r * n + c] * sp[c] + bp[c])));
      op[r * n + c] = std::fmin(std::fmax(s, 0.1f), 0.9f);
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_24_scale_bias_sigmoid_clamp_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["scale_bias_sigmoid_clamp"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(1.0 + torch.randn(dim) * 0.02)
        self.bias = nn.Parameter(torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.scale_bias_sigmoid_clamp(x.contiguous(), self.scale, self.bias)
