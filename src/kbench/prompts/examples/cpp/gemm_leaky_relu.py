import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Row-parallel GEMM with the bias + LeakyReLU epilogue applied while the output row is still in cache.
cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor gemm_bias_leaky_cpu(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double slope) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "float32 only");
    auto x_c = x.contiguous();
    auto w_c = w.contiguous();
    auto b_c = bias.contiguous();
    int64_t M = x_c.size(0), K = x_c.size(1), N = w_c.size(0);
    auto out = torch::empty({M, N}, x_c.options());
    const float* px = x_c.data_ptr<float>();
    const float* pw = w_c.data_ptr<float>();
    const float* pb = b_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const float s = (float)slope;
    #pragma omp parallel for
    for (int64_t i = 0; i < M; ++i) {
        const float* xi = px + i * K;
        for (int64_t j = 0; j < N; ++j) {
            const float* wj = pw + j * K;  // w is (N, K): row j is contiguous, so this is a dot product
            float acc = 0.0f;
            #pragma omp simd reduction(+ : acc)
            for (int64_t k = 0; k < K; ++k) {
                acc += xi[k] * wj[k];
            }
            float v = acc + pb[j];
            po[i * N + j] = v > 0.0f ? v : v * s;
        }
    }
    return out;
}
"""

gemm_ext = load_inline(
    name="kbench_example_gemm_leaky_cpp",
    cpp_sources=cpp_source,
    functions=["gemm_bias_leaky_cpu"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters and init as the reference
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.gemm_bias_leaky_cpu(x, self.linear.weight, self.linear.bias, self.negative_slope)
