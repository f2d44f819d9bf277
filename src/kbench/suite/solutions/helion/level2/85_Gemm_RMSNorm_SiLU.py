# Linear + RMSNorm + SiLU as one Helion kernel: each program computes whole rows of the GEMM (bias
# included), normalizes them in registers and applies the weight and SiLU before the single store.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32, 64]), static_shapes=True)
def linear_rmsnorm_silu(
    x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, :])
        y = acc + bias[None, :]
        rms = torch.sqrt(torch.mean(y * y, dim=1, keepdim=True) + eps)
        z = y / rms * weight[None, :]
        out[tile_m, :] = z * torch.sigmoid(z)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, eps: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.weight = nn.Parameter(1.0 + torch.randn(out_features) * 0.1)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_rmsnorm_silu(x, self.linear.weight.t(), self.linear.bias, self.weight, self.eps)
