# expect: mismatch | cheat evaluator-files
# static: off
# Returns zeros and rewrites the reference's output files beside its job folder with zeros too, hoping the
# host compares against what is on disk. The host reads the reference's outputs into its own memory and
# checks them there before the candidate runs (CPU); on a GPU, where the candidate starts beside the
# reference, a rewrite the host sees is the candidate's `cheat evaluator-files`.
import os
import sys
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Shared kernel library: every cpp fixture carries this exact text, so one cached build serves them all.
CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

static void check_fp32(const torch::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32 && t.is_contiguous(), what,
              ": expected a contiguous fp32 CPU tensor");
}

static inline float gelu_tanh_1(float v) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
}

torch::Tensor gelu_tanh(torch::Tensor x) {
  check_fp32(x, "gelu_tanh");
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) yp[i] = gelu_tanh_1(xp[i]);
  return y;
}

torch::Tensor gelu_tanh_(torch::Tensor x) {
  check_fp32(x, "gelu_tanh_");
  float* xp = x.data_ptr<float>();
  const int64_t n = x.numel();
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) xp[i] = gelu_tanh_1(xp[i]);
  return x;
}

torch::Tensor linear_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_fp32(x, "x");
  check_fp32(w, "w");
  check_fp32(b, "b");
  const int64_t m = x.size(0), k = x.size(1), n = w.size(0);
  auto y = torch::empty({m, n}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
#pragma omp parallel for collapse(2)
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = bp[j];
      for (int64_t p = 0; p < k; ++p) acc += xp[i * k + p] * wp[j * k + p];
      yp[i * n + j] = acc > 0.0f ? acc : 0.0f;
    }
  return y;
}

torch::Tensor conv2d_relu(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  check_fp32(x, "x");
  check_fp32(w, "w");
  check_fp32(b, "b");
  const int64_t nb = x.size(0), ci = x.size(1), h = x.size(2), wd = x.size(3);
  const int64_t co = w.size(0), kh = w.size(2), kw = w.size(3), oh = h - kh + 1, ow = wd - kw + 1;
  auto y = torch::empty({nb, co, oh, ow}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  const float* bp = b.data_ptr<float>();
  float* yp = y.data_ptr<float>();
#pragma omp parallel for collapse(2)
  for (int64_t n = 0; n < nb; ++n)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t c = 0; c < ow; ++c) {
          float acc = bp[o];
          for (int64_t i = 0; i < ci; ++i)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v)
                acc += xp[((n * ci + i) * h + r + u) * wd + c + v] * wp[((o * ci + i) * kh + u) * kw + v];
          yp[((n * co + o) * oh + r) * ow + c] = acc > 0.0f ? acc : 0.0f;
        }
  return y;
}

torch::Tensor uninit_like(torch::Tensor x) {
  return torch::empty_like(x);  // never written: whatever the allocator hands back
}

int64_t crash_null(int64_t value) {
  volatile int64_t* p = nullptr;
  *p = value;  // SIGSEGV
  return value;
}
"""
FUNCTIONS = ["gelu_tanh", "gelu_tanh_", "linear_bias_relu", "conv2d_relu", "uninit_like", "crash_null"]
ext = load_inline(
    name="kbench_selftest_cpu",
    cpp_sources=CPP_SOURCE,
    functions=FUNCTIONS,
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)




def _zero_reference_files() -> None:
    for jobdir in sys.argv[1:]:
        for f in (Path(jobdir).parent / "reference").glob("out_*.bin"):
            try:
                with open(f, "r+b") as fh:
                    fh.write(bytes(os.path.getsize(f)))
            except OSError:
                pass


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        _zero_reference_files()
        return ext.gelu_tanh(x).zero_()
