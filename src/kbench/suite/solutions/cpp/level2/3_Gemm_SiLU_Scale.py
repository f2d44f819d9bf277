"""Linear + SiLU + scale on CPU: BLAS GEMM without its bias, then one OpenMP pass adds the bias, applies SiLU
and the scale in place (eager: addmm + silu + mul)."""

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

// Below ~64k elements OpenMP's fork/join (~5-20 us) costs more than the loop itself.
static constexpr int64_t kParallelMin = 1 << 16;

static inline float act(float v, float scale) {
  return v / (1.0f + vexp(-v)) * scale;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale) {
  TORCH_CHECK(!x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CPU tensor");
  auto y = at::mm(x, weight.t());  // GEMM stays in the BLAS; the epilogue below is one pass
  const int64_t m = y.size(0), n = y.size(1);
  float* yp = y.data_ptr<float>();
  const float* bp = bias.data_ptr<float>();
#pragma omp parallel for schedule(static) if (m * n >= kParallelMin)
  for (int64_t r = 0; r < m; ++r) {
    float* row = yp + r * n;
#pragma omp simd
    for (int64_t c = 0; c < n; ++c) row[c] = act(row[c] + bp[c], (float)scale);
  }
  return y;
}
"""

_ext = load_inline(
    name="kbench_l2_3_gemm_silu_scale_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["forward"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(x.contiguous(), self.linear.weight, self.linear.bias, float(self.scale))
