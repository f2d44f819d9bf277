import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One pass over memory instead of the reference's six kernels (pow, mul, add, mul, tanh, mul...).
cuda_source = r"""
#include <torch/extension.h>

__global__ void gelu_tanh_kernel(const float* __restrict__ x, float* __restrict__ out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float k0 = 0.7978845608028654f;  // sqrt(2 / pi)
        float v = x[i];
        float inner = k0 * (v + 0.044715f * v * v * v);
        out[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

torch::Tensor gelu_cuda(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda(), "input must be a CUDA tensor");
    auto x_c = x.contiguous();
    auto out = torch::empty_like(x_c);
    int64_t n = x_c.numel();
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads;
    gelu_tanh_kernel<<<blocks, threads>>>(x_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor gelu_cuda(torch::Tensor x);"

gelu_ext = load_inline(
    name="kbench_example_gelu_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gelu_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_ext.gelu_cuda(x)
