"""Gemm_ReLU (kbench:2/1): cuBLAS GEMM via torch, then a custom fused bias+ReLU CUDA kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>

template <typename T>
__device__ __forceinline__ T relu(T v) { return v > T(0) ? v : T(0); }

__global__ void __launch_bounds__(256) bias_relu_kernel(const float* __restrict__ y, const float* __restrict__ b,
                                                         float* __restrict__ out, int cols, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = relu(y[i] + b[i % cols]);
}

torch::Tensor bias_relu(torch::Tensor y, torch::Tensor b) {
    auto out = torch::empty_like(y);
    int n = y.numel();
    bias_relu_kernel<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(),
                                               y.size(1), n);
    return out;
}
"""

ext = load_inline(
    name="kbench_bench_bias_relu",
    cpp_sources=["torch::Tensor bias_relu(torch::Tensor y, torch::Tensor b);"],
    cuda_sources=[cuda_src],
    functions=["bias_relu"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = torch.matmul(x, self.linear.weight.t()).contiguous()
        return ext.bias_relu(y, self.linear.bias)
