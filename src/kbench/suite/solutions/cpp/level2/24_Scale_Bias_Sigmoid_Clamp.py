"""Per-feature scale and bias, sigmoid, clamp on CPU: one OpenMP + SIMD pass instead of four (eager: mul +
add + sigmoid + clamp)."""

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
      float s = 1.0f / (1.0f + vexp(-(xp[r * n + c] * sp[c] + bp[c])));
      op[r * n + c] = s < 0.1f ? 0.1f : (s > 0.9f ? 0.9f : s);  // NaN passes through, as in torch.clamp
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_24_scale_bias_sigmoid_clamp_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["scale_bias_sigmoid_clamp"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
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
