import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One pass over memory instead of the reference's chain of six elementwise operators.
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor gelu_cpu(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto x_c = x.contiguous();
    auto out = torch::empty_like(x_c);
    const float* px = x_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    int64_t n = x_c.numel();
    const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) {
        float v = px[i];
        po[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + 0.044715f * v * v * v)));
    }
    return out;
}
"""

gelu_ext = load_inline(
    name="kbench_example_gelu_cpp",
    cpp_sources=cpp_source,
    functions=["gelu_cpu"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_cpu(x)
