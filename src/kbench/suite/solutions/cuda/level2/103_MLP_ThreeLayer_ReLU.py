"""Three linear layers with ReLU between them: the GEMMs stay in cuBLAS (at::mm / at::addmm, fp32; the Triton
solution adds fp32-accurate tensor-core GEMMs with the epilogues inside), and after each of the first two
one float4 grid-stride kernel adds the bias and applies ReLU in place; the last layer's bias is cuBLAS's
addmm epilogue (eager: three addmm and two relu passes over the 2048 x 4096 hidden states).

Full preset: 2048 x 4096 -> 4096 -> 4096 -> 1024: each hidden state is written by cuBLAS and read and
written once by the epilogue, then read by the next GEMM.
Compile-checked for sm_90 (no GPU here to run it).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_KERNELS = r"""
// In place on a GEMM output y (bias not yet added), row length n: y = relu(y + bias). V = 4: float4 (n a
// multiple of 4, y 16-byte aligned), grid-stride.
template <int V>
__global__ void bias_act_kernel(float* __restrict__ y, const float* __restrict__ bias, long long total, int n) {
  long long step = (long long)gridDim.x * blockDim.x * V;
  for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * V; i < total; i += step) {
    int c = (int)(i % n);
    if constexpr (V == 4) {
      float4 q = *reinterpret_cast<float4*>(y + i);
      float a = fmaxf(q.x + bias[c], 0.0f), b = fmaxf(q.y + bias[c + 1], 0.0f);
      float d = fmaxf(q.z + bias[c + 2], 0.0f), e = fmaxf(q.w + bias[c + 3], 0.0f);
      *reinterpret_cast<float4*>(y + i) = make_float4(a, b, d, e);
    } else {
      float a = fmaxf(y[i] + bias[c], 0.0f);
      y[i] = a;
    }
  }
}
"""

CUDA_WRAPPER = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

static int grid_for(long long work) { return (int)std::max(1LL, std::min((work + 255) / 256, 8192LL)); }

// y = act(x @ w^T + b), the bias and activation in one pass over cuBLAS's output.
static torch::Tensor linear_act(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = at::mm(x, w.t());
  long long total = y.numel();
  int n = (int)y.size(1);
  if (total == 0) return y;
  float* yp = y.data_ptr<float>();
  auto st = at::cuda::getCurrentCUDAStream();
  if (n % 4 == 0 && (reinterpret_cast<uintptr_t>(yp) & 15) == 0)
    bias_act_kernel<4><<<grid_for(total / 4), 256, 0, st>>>(yp, b.data_ptr<float>(), total, n);
  else
    bias_act_kernel<1><<<grid_for(total), 256, 0, st>>>(yp, b.data_ptr<float>(), total, n);
  return y;
}

torch::Tensor forward(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2,
                      torch::Tensor w3, torch::Tensor b3) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "expected a float32 CUDA tensor");
  auto h = linear_act(x, w1, b1);
  h = linear_act(h, w2, b2);
  return at::addmm(b3, h, w3.t());
}
"""

_ext = load_inline(
    name="kbench_l2_103_mlp_three_layer_relu_cuda",
    cpp_sources="torch::Tensor forward(torch::Tensor x, torch::Tensor w1, torch::Tensor b1, torch::Tensor w2, torch::Tensor b2, torch::Tensor w3, torch::Tensor b3);",
    cuda_sources=CUDA_KERNELS + CUDA_WRAPPER,
    functions=["forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, hidden: int, out_features: int):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.forward(
            x.contiguous(), self.fc1.weight, self.fc1.bias, self.fc2.weight, self.fc2.bias, self.fc3.weight, self.fc3.bias
        )
