"""LayerNorm's forward and backward on the CPU, each one OpenMP pass over the rows: the forward keeps each
row's mean and 1/std for the backward, which computes dx per row and dweight, dbias as per-thread partial
sums, merged in the same parallel region.

Per row xhat = (x - mean) * rstd, y = xhat * w + b. With g = dy * w:
dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dw = sum over rows of dy * xhat, db = sum of dy."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <omp.h>
#include <cmath>
#include <vector>

static constexpr int64_t kParallelMin = 1 << 16;  // elements: below this, OpenMP fork/join costs more than the loop

std::vector<torch::Tensor> ln_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
  TORCH_CHECK(!x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "expected contiguous float32");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto y = torch::empty_like(x);
  auto mean = torch::empty({rows}, x.options());
  auto rstd = torch::empty({rows}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
#pragma omp parallel for schedule(static) if (rows * d >= kParallelMin)
  for (int64_t i = 0; i < rows; ++i) {
    const float* xr = xp + i * d;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < d; ++j) s += xr[j];
    const float mu = s / (float)d;
    float ss = 0.0f;  // two passes over the cached row: no cancellation in the variance
#pragma omp simd reduction(+ : ss)
    for (int64_t j = 0; j < d; ++j) {
      const float c = xr[j] - mu;
      ss += c * c;
    }
    const float r = 1.0f / std::sqrt(ss / (float)d + (float)eps);
    mp[i] = mu;
    rp[i] = r;
    float* yr = yp + i * d;
#pragma omp simd
    for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - mu) * r * wp[j] + bp[j];
  }
  return {y, mean, rstd};
}

std::vector<torch::Tensor> ln_backward(torch::Tensor dy, torch::Tensor x, torch::Tensor w, torch::Tensor mean,
                                       torch::Tensor rstd) {
  dy = dy.contiguous();
  TORCH_CHECK(dy.scalar_type() == torch::kFloat32 && dy.sizes() == x.sizes(), "dy: float32, shaped like x");
  const int64_t d = x.size(-1), rows = x.numel() / d;
  auto dx = torch::empty_like(x);
  auto dw = torch::empty({d}, x.options());
  auto db = torch::empty({d}, x.options());
  const int threads = rows * d >= kParallelMin ? omp_get_max_threads() : 1;
  std::vector<float> partial((size_t)threads * 2 * d, 0.0f);  // per thread: dw's then db's partial sums
  const float* xp = x.data_ptr<float>();
  const float* gp = dy.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* mp = mean.data_ptr<float>();
  const float* rp = rstd.data_ptr<float>();
  float* dxp = dx.data_ptr<float>();
  float* dwp = dw.data_ptr<float>();
  float* dbp = db.data_ptr<float>();
  float* pp = partial.data();
#pragma omp parallel num_threads(threads)
  {
    float* pw = pp + (int64_t)omp_get_thread_num() * 2 * d;
    float* pb = pw + d;
#pragma omp for schedule(static)
    for (int64_t i = 0; i < rows; ++i) {
      const float* xr = xp + i * d;
      const float* gr = gp + i * d;
      const float mu = mp[i], r = rp[i];
      float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
      for (int64_t j = 0; j < d; ++j) {
        const float g = gr[j] * wp[j];
        sg += g;
        sgx += g * (xr[j] - mu) * r;
      }
      const float a = sg / (float)d, c = sgx / (float)d;
      float* dxr = dxp + i * d;
#pragma omp simd
      for (int64_t j = 0; j < d; ++j) {
        const float xhat = (xr[j] - mu) * r;
        dxr[j] = r * (gr[j] * wp[j] - a - xhat * c);
        pw[j] += gr[j] * xhat;
        pb[j] += gr[j];
      }
    }
    // the implicit barrier above: every thread's partials are complete; merge them by columns
#pragma omp for schedule(static)
    for (int64_t j = 0; j < d; ++j) {
      float sw = 0.0f, sb = 0.0f;
      for (int t = 0; t < threads; ++t) {
        sw += pp[(int64_t)t * 2 * d + j];
        sb += pp[(int64_t)t * 2 * d + d + j];
      }
      dwp[j] = sw;
      dbp[j] = sb;
    }
  }
  return {dx, dw, db};
}
"""

_ext = load_inline(
    name="kbench_l5_2_layernorm_train_cpp",
    cpp_sources=CPP_SOURCE,
    functions=["ln_forward", "ln_backward"],
    extra_cflags=["-O3", "-march=native", "-fno-trapping-math", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class _LayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        x = x.contiguous()
        y, mean, rstd = _ext.ln_forward(x, weight.contiguous(), bias.contiguous(), eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        return y

    @staticmethod
    def backward(ctx, dy):
        x, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = _ext.ln_backward(dy, x, weight.contiguous(), mean, rstd)
        return dx, dw, db, None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.bias = nn.Parameter(0.1 * torch.randn(dim))
        self.dim, self.eps = dim, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _LayerNorm.apply(x, self.weight, self.bias, self.eps)
