"""Softmax's forward and backward on the CPU, each one OpenMP pass over the rows (exp from an inlined,
vectorizable approximation): the forward keeps y for the backward.

Per row y = exp(x - max) / sum(exp(x - max)); dx = y * (dy - sum(dy * y))."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <omp.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

// Branch-free e^x that gcc vectorizes inside `omp simd` loops (libm's expf is a scalar call); built with
// -fno-trapping-math so the selects if-convert. e^x = 2^n * 2^f, n = round(x * log2 e), f in [-0.5, 0.5],
// 2^f by its degree-7 Taylor polynomial (relative error < 1e-8 there); x clamped to float's finite range.
static inline float vexp(float x) {
  x = x < -87.3f ? -87.3f : (x > 88.0f ? 88.0f : x);
  const float t = x * 1.4426950408889634f;
  const float n = (float)(int32_t)(t + (t >= 0.0f ? 0.5f : -0.5f));
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

static constexpr int64_t kParallelMin = 1 << 16;  // elements: below this, OpenMP fork/join costs more than the loop

static void check_rows(const torch::Tensor& t) {
  TORCH_CHECK(!t.is_cuda() && t.is_contiguous() && t.scalar_type() == torch::kFloat32, "expected contiguous float32");
}

torch::Tensor softmax_forward(torch::Tensor x) {
  check_rows(x);
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMin)
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = xp + i * d;
    float* yr = yp + i * d;
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int64_t j = 0; j < d; ++j) m = xr[j] > m ? xr[j] : m;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) {
      const float e = vexp(xr[j] - m);
      yr[j] = e;
      s += e;
    }
    const float inv = 1.0f / s;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] *= inv;
  }
  return y;
}

torch::Tensor softmax_backward(torch::Tensor dy, torch::Tensor y) {
  dy = dy.contiguous();
  check_rows(dy);
  TORCH_CHECK(dy.sizes() == y.sizes(), "dy shaped like y");
  const int64_t d = y.size(-1), rows = y.numel() / d;
  auto dx = torch::empty_like(y);
  const float* gp = dy.data_ptr<float>();
  const float* yp = y.data_ptr<float>();
  float* dp = dx.data_ptr<float>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMin)
  for (int64_t i = 0; i < rows; ++i) {
    const float* gr = gp + i * d;
    const float* yr = yp + i * d;
    float* dr = dp + i * d;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < d; ++j) dot += gr[j] * yr[j];
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) dr[j] = yr[j] * (gr[j] - dot);
  }
  return dx;
}
"""

_ext = load_inline(
    name="kbench_l5_13_softmax_train_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["softmax_forward", "softmax_backward"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class _Softmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = _ext.softmax_forward(x.contiguous())
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return _ext.softmax_backward(dy, y)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _Softmax.apply(x)
