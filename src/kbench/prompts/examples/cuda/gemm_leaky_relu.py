import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Tiled GEMM whose epilogue adds the bias and applies LeakyReLU before the single store, so the
# (batch x out_features) intermediate never makes a round trip through global memory.
cuda_source = r"""
#include <torch/extension.h>

#define TILE 16

__global__ void gemm_bias_leaky_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                       const float* __restrict__ bias, float* __restrict__ out,
                                       int M, int N, int K, float slope) {
    __shared__ float xs[TILE][TILE];
    __shared__ float ws[TILE][TILE + 1];  // +1 avoids bank conflicts on the transposed read
    int row = blockIdx.y * TILE + threadIdx.y;  // row of x and out
    int col = blockIdx.x * TILE + threadIdx.x;  // column of out = row of w
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int kx = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[(int64_t)row * K + kx] : 0.0f;
        int wrow = blockIdx.x * TILE + threadIdx.y;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && kx < K) ? w[(int64_t)wrow * K + kx] : 0.0f;
        __syncthreads();
        #pragma unroll
        for (int k = 0; k < TILE; ++k) {
            acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        }
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc + bias[col];
        out[(int64_t)row * N + col] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor gemm_bias_leaky_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double slope) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && bias.is_cuda(), "inputs must be CUDA tensors");
    auto x_c = x.contiguous();
    auto w_c = w.contiguous();
    int M = x_c.size(0), K = x_c.size(1), N = w_c.size(0);
    auto out = torch::empty({M, N}, x_c.options());
    dim3 threads(TILE, TILE);
    dim3 blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    gemm_bias_leaky_kernel<<<blocks, threads>>>(x_c.data_ptr<float>(), w_c.data_ptr<float>(),
                                                bias.contiguous().data_ptr<float>(), out.data_ptr<float>(),
                                                M, N, K, (float)slope);
    return out;
}
"""

cpp_source = (
    "torch::Tensor gemm_bias_leaky_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor bias, double slope);"
)

gemm_ext = load_inline(
    name="kbench_example_gemm_leaky_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["gemm_bias_leaky_cuda"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, negative_slope: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)  # same parameters and init as the reference
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gemm_ext.gemm_bias_leaky_cuda(x, self.linear.weight, self.linear.bias, self.negative_slope)
