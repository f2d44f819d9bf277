# RMSNorm of x (with its weight) times SiLU(g) as one Helion row kernel: each program reads whole rows of
# x and g once, reduces x's mean square in registers and writes the gated result once.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[32]), static_shapes=True)
def rmsnorm_swiglu(x: torch.Tensor, g: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    m, n = x.size()
    out = torch.empty_like(x)
    for tile_m in hl.tile(m):
        xv = x[tile_m, :]
        gv = g[tile_m, :]
        rms = torch.sqrt(torch.mean(xv * xv, dim=1, keepdim=True) + eps)
        out[tile_m, :] = xv / rms * weight[None, :] * (gv * torch.sigmoid(gv))
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + torch.randn(dim) * 0.02)

    def forward(self, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        return rmsnorm_swiglu(x, g, self.weight, self.eps)
