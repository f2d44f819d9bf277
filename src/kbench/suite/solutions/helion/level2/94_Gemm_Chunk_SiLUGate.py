# Linear + chunk + a * SiLU(b) as one Helion GEMM: each program accumulates the matching tiles of both
# halves of the output (a and b) and writes only the gated [M, N] result.

import helion
import helion.language as hl
import torch
import torch.nn as nn


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 64]), static_shapes=True)
def linear_silu_gate(
    x: torch.Tensor, wa_t: torch.Tensor, wb_t: torch.Tensor, bias_a: torch.Tensor, bias_b: torch.Tensor
) -> torch.Tensor:
    m, k = x.size()
    n = wa_t.size(1)
    out = torch.empty([m, n], dtype=x.dtype, device=x.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc_a = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        acc_b = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            xv = x[tile_m, tile_k]
            acc_a = torch.addmm(acc_a, xv, wa_t[tile_k, tile_n])
            acc_b = torch.addmm(acc_b, xv, wb_t[tile_k, tile_n])
        a = acc_a + bias_a[tile_n]
        b = acc_b + bias_b[tile_n]
        out[tile_m, tile_n] = a * b * torch.sigmoid(b)
    return out


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.linear.out_features // 2
        w_t = self.linear.weight.t()
        bias = self.linear.bias
        return linear_silu_gate(x, w_t[:, :n], w_t[:, n:], bias[:n], bias[n:])
