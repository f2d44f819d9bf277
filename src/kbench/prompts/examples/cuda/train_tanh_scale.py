import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <vector>

// forward: y = tanh(x) * scale, one pass; t = tanh(x) is kept for the backward
__global__ void forward_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                               float* __restrict__ y, float* __restrict__ t, int64_t n, int64_t d) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = tanhf(x[i]);
        t[i] = v;
        y[i] = v * scale[i % d];
    }
}

// backward, elementwise: dx = dy * scale * (1 - t^2)
__global__ void dx_kernel(const float* __restrict__ dy, const float* __restrict__ t,
                          const float* __restrict__ scale, float* __restrict__ dx, int64_t n, int64_t d) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = t[i];
        dx[i] = dy[i] * scale[i % d] * (1.0f - v * v);
    }
}

// backward, reduction: dscale[j] = sum over rows of dy * t. A block of 32 x 8 threads owns 32 columns:
// each warp reads 32 neighbouring columns of a row (coalesced), its 8 row groups split the rows, and the
// 8 partial sums meet in shared memory. The sums run in double: thousands of fp32 additions one after
// another drift past an fp32 tolerance where a column's sum is near zero.
constexpr int COLS = 32, ROW_GROUPS = 8;
__global__ void dscale_kernel(const float* __restrict__ dy, const float* __restrict__ t,
                              float* __restrict__ dscale, int64_t rows, int64_t d) {
    __shared__ double part[ROW_GROUPS][COLS];
    int64_t j = (int64_t)blockIdx.x * COLS + threadIdx.x;
    double acc = 0.0;
    if (j < d)
        for (int64_t r = threadIdx.y; r < rows; r += ROW_GROUPS) acc += (double)dy[r * d + j] * t[r * d + j];
    part[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && j < d) {
        for (int g = 1; g < ROW_GROUPS; ++g) acc += part[g][threadIdx.x];
        dscale[j] = (float)acc;
    }
}

std::vector<torch::Tensor> tanh_scale_forward(torch::Tensor x, torch::Tensor scale) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    auto t = torch::empty_like(xc);
    int64_t n = xc.numel(), d = scale.numel();
    forward_kernel<<<(n + 255) / 256, 256>>>(xc.data_ptr<float>(), scale.data_ptr<float>(),
                                             y.data_ptr<float>(), t.data_ptr<float>(), n, d);
    return {y, t};
}

std::vector<torch::Tensor> tanh_scale_backward(torch::Tensor dy, torch::Tensor t, torch::Tensor scale) {
    auto g = dy.contiguous();
    auto dx = torch::empty_like(g);
    auto dscale = torch::empty_like(scale);
    int64_t n = g.numel(), d = scale.numel();
    dx_kernel<<<(n + 255) / 256, 256>>>(g.data_ptr<float>(), t.data_ptr<float>(), scale.data_ptr<float>(),
                                        dx.data_ptr<float>(), n, d);
    dscale_kernel<<<(d + COLS - 1) / COLS, dim3(COLS, ROW_GROUPS)>>>(g.data_ptr<float>(), t.data_ptr<float>(),
                                                                   dscale.data_ptr<float>(), n / d, d);
    return {dx, dscale};
}
"""

cpp_source = """
std::vector<torch::Tensor> tanh_scale_forward(torch::Tensor x, torch::Tensor scale);
std::vector<torch::Tensor> tanh_scale_backward(torch::Tensor dy, torch::Tensor t, torch::Tensor scale);
"""

ext = load_inline(
    name="kbench_example_train_tanh_scale_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["tanh_scale_forward", "tanh_scale_backward"],
    extra_cuda_cflags=["-O3"],
)


class TanhScale(torch.autograd.Function):
    """Both passes in our own kernels: forward saves tanh(x), backward computes dx and dscale from it."""

    @staticmethod
    def forward(ctx, x, scale):
        y, t = ext.tanh_scale_forward(x, scale)
        ctx.save_for_backward(t, scale)
        return y

    @staticmethod
    def backward(ctx, dy):
        t, scale = ctx.saved_tensors
        dx, dscale = ext.tanh_scale_backward(dy, t, scale)
        return dx, dscale


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return TanhScale.apply(x, self.scale)
