"""The seed's hand-written tanh GELU on CPU: eight torch ops (eight passes and seven temporaries) become one
OpenMP + SIMD pass; tanh is inlined, branch-free math so the loop vectorizes."""

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

// tanh(|x|) = (1 - e^(-2|x|)) / (1 + e^(-2|x|)); absolute error ~1e-7 (relative error grows only where
// |tanh| is tiny, far below the 1e-4 tolerance).
static inline float vtanh(float x) {
  const float e = vexp(-2.0f * std::fabs(x));
  const float r = (1.0f - e) / (1.0f + e);
  return x < 0.0f ? -r : r;
}

static constexpr int64_t kParallelMin = 1 << 16;  // below this, OpenMP fork/join costs more than the loop

torch::Tensor gelu_tanh(torch::Tensor x) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected a contiguous float32 CPU tensor");
  auto out = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t total = x.numel();
  const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
  const int64_t chunk = 4096, chunks = (total + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t b = 0; b < chunks; ++b) {
    const int64_t end = std::min(total, (b + 1) * chunk);
#pragma omp simd
    for (int64_t i = b * chunk; i < end; ++i) {
      float v = xp[i];
      op[i] = 0.5f * v * (1.0f + vtanh(k0 * (v + k1 * v * v * v)));
    }
  }
  return out;
}
"""

_ext = load_inline(
    name="kbench_l2_23_gelu_tanh_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["gelu_tanh"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.gelu_tanh(x.contiguous())
