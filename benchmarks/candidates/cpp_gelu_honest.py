# The honest C++ twin of cpp_gelu_batch_together.py, for tiny_gelu_problem.py: one extension call per call
# (a plain loop, no OpenMP: on 1,024 elements a parallel region would cost more than the work).
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu_tanh(torch::Tensor x) {
  TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat32 && x.is_contiguous(), "fp32 CPU input");
  auto y = torch::empty_like(x);
  const float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0, n = x.numel(); i < n; ++i) {
    const float v = xp[i];
    yp[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
  }
  return y;
}
"""
ext = load_inline(
    name="kbench_bench_gelu", cpp_sources=CPP_SOURCE, functions=["gelu_tanh"], extra_cflags=["-O3"]
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.gelu_tanh(x.contiguous())
