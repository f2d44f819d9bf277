# ReGLU MLP as two Helion GEMMs: the first computes the gate and up projections of the same x tiles together
# and writes only relu(gate) * up; the second is the down projection with its bias in the epilogue.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 64]), static_shapes=True)
def reglu_up(
    x: torch.Tensor, wg_t: torch.Tensor, wu_t: torch.Tensor, bias_g: torch.Tensor, bias_u: torch.Tensor
) -> torch.Tensor:
    m, k = x.size()
    n = wg_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc_g = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        acc_u = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            xv = x[tile_m, tile_k]
            acc_g = torch.addmm(acc_g, xv, wg_t[tile_k, tile_n])
            acc_u = torch.addmm(acc_u, xv, wu_t[tile_k, tile_n])
        out[tile_m, tile_n] = torch.relu(acc_g + bias_g[tile_n]) * (acc_u + bias_u[tile_n])
    return out


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 64]), static_shapes=True)
def linear(x: torch.Tensor, w_t: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    m, k = x.size()
    n = w_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, x[tile_m, tile_k], w_t[tile_k, tile_n])
        out[tile_m, tile_n] = acc + bias[tile_n]
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(dim, hidden)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = reglu_up(x, self.gate.weight.t(), self.up.weight.t(), self.gate.bias, self.up.bias)
        return linear(h, self.down.weight.t(), self.down.bias)
