"""RMSNorm's forward and backward on the CPU, each one OpenMP pass over the rows: the forward keeps each
row's 1/rms for the backward, which computes dx per row and dweight as per-thread partial sums merged once.

Per row r = 1/sqrt(mean(x^2) + eps), xhat = x * r, y = xhat * w. With g = dy * w:
dx = r * (g - xhat * mean(g * xhat)), dw = sum over rows of dy * xhat."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <omp.h>
#include <cmath>
#include <vector>

std::vector<torch::Tensor> rms_forward(torch::Tensor x, torch::Tensor w, double eps) {
  TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto y = torch::empty_like(x);
  auto rstd = torch::empty({rows}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = xp + i * d;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; ++j) ss += xr[j] * xr[j];
    const float r = 1.0f / std::sqrt(ss / (float)d + (float)eps);
    rp[i] = r;
    float* yr = yp + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] = xr[j] * r * wp[j];
  }
  return {y, rstd};
}

std::vector<torch::Tensor> rms_backward(torch::Tensor dy, torch::Tensor x, torch::Tensor w, torch::Tensor rstd) {
  dy = dy.contiguous();
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto dx = torch::empty_like(x);
  const int threads = omp_get_max_threads();
  auto partial = torch::zeros({threads, d}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* gp = dy.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();
  float* pp = partial.data_ptr<float>();
#pragma omp parallel
  {
    float* dw = pp + (int64_t)omp_get_thread_num() * d;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float* xr = xp + i * d;
      const float* gr = gp + i * d;
      const float r = rp[i];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t j = 0; j < d; ++j) dot += gr[j] * wp[j] * xr[j] * r;
      const float m = dot / (float)d;
      float* dxr = dxp + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        const float xhat = xr[j] * r;
        dxr[j] = r * (gr[j] * wp[j] - xhat * m);
        dw[j] += gr[j] * xhat;
      }
    }
  }
  return {dx, partial.sum(0)};
}
"""

_ext = load_inline(
    name="kbench_l5_1_rmsnorm_train_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["rms_forward", "rms_backward"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, eps):
        x = x.contiguous()
        y, rstd = _ext.rms_forward(x, weight.contiguous(), eps)
        ctx.save_for_backward(x, weight, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, rstd = ctx.saved_tensors
        dx, dw = _ext.rms_backward(dy, x, weight.contiguous(), rstd)
        return dx, dw, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _RMSNorm.apply(x, self.weight, self.eps)
