# Linear + residual add + LayerNorm as one Helion kernel: each program computes whole rows of the GEMM,
# adds bias and the residual x, and normalizes them in registers before the single store.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32, 64]), static_shapes=True)
def linear_residual_layernorm(
    x: torch.Tensor,
    w_t: torch.Tensor,
    bias: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    eps: float,
) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m in hl.tile(m):
        acc = hl.zeros([tile_m, n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, :])
        v = acc + bias[None, :] + x[tile_m, :]
        mean = torch.mean(v, dim=1, keepdim=True)
        centered = v - mean
        var = torch.mean(centered * centered, dim=1, keepdim=True)
        out[tile_m, :] = centered / torch.sqrt(var + eps) * gamma[None, :] + beta[None, :]
    return out


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.layer_norm = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ln = self.layer_norm
        return linear_residual_layernorm(
            x, self.linear.weight.t(), self.linear.bias, ln.weight, ln.bias, ln.eps
        )
