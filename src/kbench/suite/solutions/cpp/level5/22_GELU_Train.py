"""Tanh GELU's forward and backward on the CPU, each one OpenMP + SIMD pass: the forward reads x and writes
y, the backward reads x and dy and writes dx (eager's gelu and gelu_backward kernels do the same passes;
here tanh is inlined, branch-free math so both loops vectorize).

With u = k0 (x + k1 x^3), t = tanh(u) and sech^2(u) = 1 - t^2 = 4e / (1 + e)^2 for e = exp(-2|u|)
(no cancellation where t nears 1): y = x (1 + t) / 2, dy/dx = (1 + t) / 2 + x sech^2(u) k0 (1 + 3 k1 x^2) / 2."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

// Branch-free float math that the compiler vectorizes inside `omp simd` loops (libm's expf/tanhf are scalar
// calls). Built with -fno-trapping-math, without which gcc 12 will not if-convert the selects below.
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
static constexpr float kBeta = 0.7978845608028654f;  // sqrt(2 / pi)
static constexpr float kKappa = 0.044715f;

static void check(const torch::Tensor& t, const char* name) {
  TORCH_CHECK(!t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32,
              name, ": expected a contiguous float32 CPU tensor");
}

torch::Tensor gelu_forward(torch::Tensor x) {
  check(x, "x");
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t total = x.numel();
  const int64_t chunk = 4096, chunks = (total + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t b = 0; b < chunks; ++b) {
    const int64_t end = std::min(total, (b + 1) * chunk);
#pragma omp simd
    for (int64_t i = b * chunk; i < end; ++i) {
      const float v = xp[i];
      const float u = kBeta * (v + kKappa * v * v * v);
      const float e = vexp(-2.0f * std::fabs(u));
      const float r = (1.0f - e) / (1.0f + e);
      const float t = u < 0.0f ? -r : r;
      yp[i] = 0.5f * v * (1.0f + t);
    }
  }
  return y;
}

torch::Tensor gelu_backward(torch::Tensor dy, torch::Tensor x) {
  check(dy, "dy");
  check(x, "x");
  TORCH_CHECK(dy.numel() == x.numel(), "dy and x differ in size");
  auto dx = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  const float* gp = dy.data_ptr<float>();
  float* dp = dx.data_ptr<float>();
  const int64_t total = x.numel();
  const int64_t chunk = 4096, chunks = (total + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (total >= kParallelMin)
  for (int64_t b = 0; b < chunks; ++b) {
    const int64_t end = std::min(total, (b + 1) * chunk);
#pragma omp simd
    for (int64_t i = b * chunk; i < end; ++i) {
      const float v = xp[i];
      const float v2 = v * v;
      const float u = kBeta * (v + kKappa * v2 * v);
      const float e = vexp(-2.0f * std::fabs(u));
      const float inv = 1.0f / (1.0f + e);
      const float r = (1.0f - e) * inv;
      const float t = u < 0.0f ? -r : r;
      const float sech2 = 4.0f * e * inv * inv;
      const float d = 0.5f * (1.0f + t) + 0.5f * v * sech2 * kBeta * (1.0f + 3.0f * kKappa * v2);
      dp[i] = gp[i] * d;
    }
  }
  return dx;
}
"""

_ext = load_inline(
    name="kbench_l5_22_gelu_train_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["gelu_forward", "gelu_backward"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class _GELU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        ctx.save_for_backward(x)
        return _ext.gelu_forward(x)

    @staticmethod
    def backward(ctx, dy):
        (x,) = ctx.saved_tensors
        return _ext.gelu_backward(dy.contiguous(), x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _GELU.apply(x)
