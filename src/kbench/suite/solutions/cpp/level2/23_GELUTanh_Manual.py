"""The seed's hand-written tanh GELU on CPU: eight torch ops (eight passes and seven temporaries) become one
OpenMP + SIMD pass."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

static constexpr int64_t kParallelMin = 1 << 16;  // below this, OpenMP fork/join costs more than the loop

torch::Tensor gelu_tanh(torch::Tensor x) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CPU tensor");
  auto out = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t total = x.numel();
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
#pragma omp parallel for simd schedule(static) if (total >= kParallelMin)
  for (int64_t i = 0; i < total; ++i) {
    float v = xp[i];
    op[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v)));
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_23_gelu_tanh_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["gelu_tanh"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x.contiguous())
