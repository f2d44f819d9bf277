# Residual add + LayerNorm as one Helion row kernel: each program reads whole rows of x and the residual
# once, computes the statistics of their sum in registers and writes the normalized rows once.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
def add_layernorm(
    x: torch.Tensor, residual: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float
) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        v = x[tile_m, :] + residual[tile_m, :]
        mean = torch.mean(v, dim=1, keepdim=True)
        centered = v - mean
        var = torch.mean(centered * centered, dim=1, keepdim=True)
        out[tile_m, :] = centered / torch.sqrt(var + eps) * gamma[None, :] + beta[None, :]
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.layer_norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        dim = x.shape[-1]
        ln = self.layer_norm
        out = add_layernorm(x.reshape(-1, dim), residual.reshape(-1, dim), ln.weight, ln.bias, ln.eps)
        return out.view(x.shape)
